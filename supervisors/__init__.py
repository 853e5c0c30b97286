"""supervisors: an Erlang/OTP-style actor runtime on trio."""
