"""Settings shared by every test: nothing here may reach the network or the user's own state."""

from __future__ import annotations

import os

# litellm fetches its model cost map at import unless told to use the bundled copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
