"""The console: the jobs, approvals, spending and runtime of a node, in a browser.

`Console` is its web app (server-rendered Jinja2 templates, a little plain JavaScript, nothing
fetched from elsewhere), mounted at ``/console`` by `serve --http` and served alone over the
home by `ask-another console` (`serve_console`). It is a face, like the CLI: every page reads
and acts through the library faces the MCP tools use, as the logged-in user (docs/console.md).
"""

from ask_another.console._app import ROOT as ROOT
from ask_another.console._app import Console as Console
from ask_another.console._app import Login as Login
from ask_another.console._metrics import Metrics as Metrics
from ask_another.console._questions import Pending as Pending
from ask_another.console._questions import pending_of as pending_of
from ask_another.console._questions import pending_questions as pending_questions
from ask_another.console._session import LoginCodes as LoginCodes
from ask_another.console._session import Sessions as Sessions
from ask_another.console._session import load_key as load_key

__all__ = [
    "ROOT",
    "Console",
    "Login",
    "LoginCodes",
    "Metrics",
    "Pending",
    "Sessions",
    "load_key",
    "pending_of",
    "pending_questions",
]
