"""supervisors: an Erlang/OTP-style actor runtime on trio.

Actors (`Actor`, `spawn`, `ActorRef`), calls with deferred replies (`NOREPLY`, `Caller`),
follow-ups and declined starts (`Continue`, `IGNORE`),
monitors and links, supervisors with OTP's restart strategies, a dynamic supervisor, and a name
registry. See docs/supervisors.md.
"""

from ._actor import Actor as Actor
from ._call import NOREPLY as NOREPLY
from ._call import Caller as Caller
from ._dynamic import DynamicSupervisorRef as DynamicSupervisorRef
from ._dynamic import dynamic_supervisor_spec as dynamic_supervisor_spec
from ._dynamic import open_dynamic_supervisor as open_dynamic_supervisor
from ._dynamic import start_dynamic_supervisor as start_dynamic_supervisor
from ._errors import ActorExited as ActorExited
from ._errors import CallTimeout as CallTimeout
from ._errors import CallToSelf as CallToSelf
from ._errors import InvalidSpec as InvalidSpec
from ._errors import MailboxFull as MailboxFull
from ._errors import MaxChildren as MaxChildren
from ._errors import NameTaken as NameTaken
from ._errors import NoProcess as NoProcess
from ._errors import StartError as StartError
from ._errors import SupervisorError as SupervisorError
from ._errors import UnknownChild as UnknownChild
from ._errors import WrongThread as WrongThread
from ._reasons import Crash as Crash
from ._reasons import Down as Down
from ._reasons import Exit as Exit
from ._reasons import ExitReason as ExitReason
from ._reasons import IdleTimeout as IdleTimeout
from ._reasons import Killed as Killed
from ._reasons import Normal as Normal
from ._reasons import Shutdown as Shutdown
from ._reasons import TaskCancelled as TaskCancelled
from ._reasons import TaskDone as TaskDone
from ._ref import ActorRef as ActorRef
from ._ref import ActorStatistics as ActorStatistics
from ._ref import MonitorRef as MonitorRef
from ._registry import Registry as Registry
from ._returns import IGNORE as IGNORE
from ._returns import Continue as Continue
from ._spawn import DEFAULT_MAILBOX_SIZE as DEFAULT_MAILBOX_SIZE
from ._spawn import spawn as spawn
from ._spec import ChildSpec as ChildSpec
from ._spec import ChildType as ChildType
from ._spec import Restart as Restart
from ._spec import ShutdownPolicy as ShutdownPolicy
from ._spec import Start as Start
from ._spec import child_spec as child_spec
from ._supervisor import GIVE_UP_REASON as GIVE_UP_REASON
from ._supervisor import RECENT_EXITS as RECENT_EXITS
from ._supervisor import AutoShutdown as AutoShutdown
from ._supervisor import ChildCounts as ChildCounts
from ._supervisor import ChildExit as ChildExit
from ._supervisor import ChildInfo as ChildInfo
from ._supervisor import ChildStatus as ChildStatus
from ._supervisor import Strategy as Strategy
from ._supervisor import SupervisorRef as SupervisorRef
from ._supervisor import SupervisorStatistics as SupervisorStatistics
from ._supervisor import open_supervisor as open_supervisor
from ._supervisor import start_supervisor as start_supervisor
from ._supervisor import supervisor_spec as supervisor_spec
from ._tasks import TaskHandle as TaskHandle
from ._tasks import TaskState as TaskState

__all__ = [
    "DEFAULT_MAILBOX_SIZE",
    "GIVE_UP_REASON",
    "IGNORE",
    "NOREPLY",
    "RECENT_EXITS",
    "Actor",
    "ActorExited",
    "ActorRef",
    "ActorStatistics",
    "AutoShutdown",
    "CallTimeout",
    "CallToSelf",
    "Caller",
    "ChildCounts",
    "ChildExit",
    "ChildInfo",
    "ChildSpec",
    "ChildStatus",
    "ChildType",
    "Continue",
    "Crash",
    "Down",
    "DynamicSupervisorRef",
    "Exit",
    "ExitReason",
    "IdleTimeout",
    "InvalidSpec",
    "Killed",
    "MailboxFull",
    "MaxChildren",
    "MonitorRef",
    "NameTaken",
    "NoProcess",
    "Normal",
    "Registry",
    "Restart",
    "Shutdown",
    "ShutdownPolicy",
    "Start",
    "StartError",
    "Strategy",
    "SupervisorError",
    "SupervisorRef",
    "SupervisorStatistics",
    "TaskCancelled",
    "TaskDone",
    "TaskHandle",
    "TaskState",
    "UnknownChild",
    "WrongThread",
    "child_spec",
    "dynamic_supervisor_spec",
    "open_dynamic_supervisor",
    "open_supervisor",
    "spawn",
    "start_dynamic_supervisor",
    "start_supervisor",
    "supervisor_spec",
]
