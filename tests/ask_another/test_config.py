"""Config parsing: every MODEL_* shape a person might write, the settings, and shorthands."""

from __future__ import annotations

from pathlib import Path

import pytest

from ask_another.config import Config, Secret, key_notes, trim_provider_keys
from ask_another.errors import AmbiguousModel, ModelNotAllowed
from ask_another.server.wording import tool_text

KEY = "sk-test-0123456789abcdef"


def parse(**env: str) -> Config:
    return Config.from_env({"ASK_ANOTHER_HOME": "/tmp/aa-test-home", **env})


def problem_for(config: Config, variable: str) -> str:
    found = [p.message for p in config.problems if p.variable == variable]
    assert found, f"no problem reported for {variable}: {config.problems}"
    return found[0]


def test_good_variable_gives_model_shorthand_provider_and_key():
    config = parse(MODEL_GPT4=f"openai/gpt-4o;{KEY}")
    [entry] = config.models
    assert (entry.variable, entry.shorthand, entry.model, entry.provider) == (
        "MODEL_GPT4", "gpt4", "openai/gpt-4o", "openai")
    assert entry.api_key.reveal() == KEY
    assert entry.api_base is None
    assert config.problems == ()


def test_spaces_around_the_fields_are_trimmed_not_sent_with_the_key():
    # "openai/gpt-4o; sk-..." (a space after the ';', as people write a list) must not send
    # " sk-..." as the key: every call would fail with a 401 that names no cause.
    config = parse(MODEL_GPT4=f" openai/gpt-4o ;  {KEY} ; http://127.0.0.1:8080/v1 ")
    [entry] = config.models
    assert (entry.model, entry.api_key.reveal(), entry.api_base) == (
        "openai/gpt-4o", KEY, "http://127.0.0.1:8080/v1")
    assert config.problems == ()


def test_third_field_is_the_api_base_and_an_empty_key_is_allowed():
    config = parse(MODEL_LOCAL="openai/llama3;;http://127.0.0.1:8080/v1/")
    [entry] = config.models
    assert entry.api_base == "http://127.0.0.1:8080/v1"
    assert not entry.api_key
    assert config.problems == ()


@pytest.mark.parametrize(("value", "fragment"), [
    ("", "is blank"),
    ("   ", "is blank"),
    ("gpt-4o;" + KEY, "'provider/model-name'"),
    ("openai/;" + KEY, "'provider/model-name'"),
    ("/gpt-4o;" + KEY, "'provider/model-name'"),
    ("openai/gpt-4o", "missing ';api-key'"),
    # Both missing parts named at once, not one fix after the other.
    ("gpt-4o", "missing the provider before the model ('openai/gpt-4o' for an OpenAI model, "
               "not 'gpt-4o') and ';api-key' after it"),
    # The value itself, not a canned example (it said "not 'gpt-4o'" of "nope")...
    ("nope", "missing the provider before the model ('openai/nope' for an OpenAI model, not "
             "'nope')"),
    # ...unless it may be a key, which is never repeated.
    (KEY.split(";")[0], "missing the provider before the model (like 'openai/gpt-4o')"),
    (f"openai/gpt-4o;{KEY};http://h/v1;extra", "at most 3"),
    (f"openai/gpt-4o;{KEY};ftp://h", "http:// or https://"),
    (f"openai/gpt 4o;{KEY}", "whitespace"),
])
def test_malformed_variable_is_named_and_the_others_keep_working(value, fragment):
    config = parse(MODEL_BAD=value, MODEL_GOOD=f"openai/gpt-4o;{KEY}")
    assert [m.shorthand for m in config.models] == ["good"]
    message = problem_for(config, "MODEL_BAD")
    assert fragment in message
    assert "provider/model;api-key" in message  # says what the right shape is


def test_problem_messages_never_quote_the_value():
    config = parse(MODEL_A=f"{KEY};openai/gpt-4o;x;y", MODEL_B=f"{KEY}", MODEL_C=f"nokey{KEY}")
    text = " ".join(str(p) for p in config.problems)
    assert len(config.problems) == 3
    assert KEY not in text


def test_duplicate_names_keep_the_first_and_name_the_second():
    config = parse(MODEL_GPT=f"openai/gpt-4o;{KEY}", MODEL_gpt=f"openai/gpt-4o-mini;{KEY}")
    assert [m.model for m in config.models] == ["openai/gpt-4o"]
    assert "duplicate name" in problem_for(config, "MODEL_gpt")
    assert "MODEL_GPT" in problem_for(config, "MODEL_gpt")


def test_variable_with_no_name_after_the_prefix():
    config = parse(MODEL_=f"openai/gpt-4o;{KEY}")
    assert config.models == ()
    assert "needs a name" in problem_for(config, "MODEL_")


def test_non_model_variables_are_ignored():
    config = parse(MODELS="x", PATH="/bin", MY_MODEL_X="y")
    assert config.models == () and config.problems == ()


def test_secret_is_masked_in_repr_str_and_in_the_entry_repr():
    secret = Secret(KEY)
    entry = parse(MODEL_GPT4=f"openai/gpt-4o;{KEY}").models[0]
    for text in (repr(secret), str(secret), repr(entry), str(entry), f"{secret}"):
        assert KEY not in text
    assert secret.reveal() == KEY


def test_resolution_by_exact_id_shorthand_and_unique_provider():
    config = parse(MODEL_GPT4=f"openai/gpt-4o;{KEY}", MODEL_GEM=f"gemini/gemini-2.5-pro;{KEY}")
    assert config.resolve("openai/gpt-4o").shorthand == "gpt4"
    assert config.resolve("GPT4").model == "openai/gpt-4o"
    assert config.resolve("gemini").model == "gemini/gemini-2.5-pro"
    assert config.resolve(" openai ").model == "openai/gpt-4o"


def test_ambiguous_provider_shorthand_lists_the_candidates():
    config = parse(MODEL_BIG=f"openai/gpt-4o;{KEY}", MODEL_SMALL=f"openai/gpt-4o-mini;{KEY}")
    with pytest.raises(AmbiguousModel) as caught:
        config.resolve("openai")
    assert "openai/gpt-4o-mini" in str(caught.value) and "big (openai/gpt-4o)" in str(caught.value)


def test_unknown_model_is_not_allowed_with_similar_suggestions():
    config = parse(MODEL_GPT4=f"openai/gpt-4o;{KEY}", MODEL_GEM=f"gemini/gemini-2.5-pro;{KEY}")
    with pytest.raises(ModelNotAllowed) as caught:
        config.resolve("openai/gpt-4o-2024-05-13")
    assert str(caught.value).startswith("Model not allowed")
    assert caught.value.suggestions == ["openai/gpt-4o"]
    with pytest.raises(ModelNotAllowed) as caught:
        config.resolve("anthropic/claude")
    # No similar one: the next step is to list them, worded by each face (the config names no
    # tool itself).
    assert caught.value.hint == "list_models"
    assert "list_models" in tool_text(caught.value)


def test_settings_defaults_and_overrides(tmp_path: Path):
    default = Config.from_env({})
    assert default.timeout == 60 and default.poll_seconds > 0
    assert "ask-another" in str(default.home)
    config = Config.from_env({
        "ASK_ANOTHER_HOME": str(tmp_path / "h"),
        "ASK_ANOTHER_TIMEOUT": "12.5",
        "ASK_ANOTHER_POLL_SECONDS": "0.25",
        "ASK_ANOTHER_ALLOW_HOSTS": " Example.org, 127.0.0.1:8080 ,,",
        "ASK_ANOTHER_LOG_LEVEL": "debug",
    })
    assert config.home == tmp_path / "h"
    assert config.database_path.parent == tmp_path / "h"
    assert (config.timeout, config.poll_seconds, config.log_level) == (12.5, 0.25, "DEBUG")
    assert config.allow_hosts == frozenset({"example.org", "127.0.0.1:8080"})
    assert config.problems == ()


@pytest.mark.parametrize(("variable", "value"), [
    ("ASK_ANOTHER_TIMEOUT", "soon"),
    ("ASK_ANOTHER_TIMEOUT", "-5"),
    ("ASK_ANOTHER_POLL_SECONDS", "0"),
    ("ASK_ANOTHER_ALLOW_HOSTS", "http://example.org/path"),
    ("ASK_ANOTHER_ALLOW_HOSTS", "host:port"),
    ("ASK_ANOTHER_LOG_LEVEL", "loud"),
])
def test_bad_settings_are_problems_and_fall_back_to_defaults(variable, value):
    config = Config.from_env({variable: value})
    assert problem_for(config, variable)
    assert config.timeout == 60 and config.log_level == "INFO"


def test_no_database_url_means_the_sqlite_file_under_the_home(tmp_path: Path):
    config = Config.from_env({"ASK_ANOTHER_HOME": str(tmp_path)})
    assert config.database_url is None
    assert config.database == tmp_path / "ask-another.sqlite3"


@pytest.mark.parametrize("url, shown", [
    ("postgresql://team:s3cret-PW@db.internal:5432/ask", "postgresql://team:****@db.internal:5432/ask"),
    ("postgres://team:p@ss:w0rd@db/ask", "postgres://team:****@db/ask"),  # @ and : in it
    ("postgresql://db/ask?password=s3cret-PW&sslmode=require",
     "postgresql://db/ask?password=****&sslmode=require"),
    ("postgresql:///ask?host=/var/run/postgresql", "postgresql:///ask?host=/var/run/postgresql"),
])
def test_a_database_url_is_kept_secret_and_shown_without_its_password(url: str, shown: str):
    config = Config.from_env({"ASK_ANOTHER_DATABASE_URL": url,
                              "ASK_ANOTHER_DATABASE_POOL_SIZE": "4"})
    database = config.database_url
    assert database is not None and config.database is database
    assert database.shown == shown and database.problem is None and database.pool_size == 4
    assert database.url.reveal() == url
    for secret in ("s3cret-PW", "p@ss:w0rd"):
        assert secret not in repr(config) and secret not in str(database.url)


@pytest.mark.parametrize("url, fragment", [
    ("mysql://team:s3cret-PW@db/ask", "must be a postgresql:// URL, got mysql scheme"),
    ("postgresql://team:s3cret-PW@db:port/ask", "is not a valid URL"),
    ("postgresql://team:s3cret-PW@db/", "names no database"),
    ("db.internal/ask", "must be a postgresql:// URL, got no scheme"),
])
def test_a_malformed_database_url_is_a_problem_that_never_quotes_it(url: str, fragment: str):
    config = Config.from_env({"ASK_ANOTHER_DATABASE_URL": url})
    (problem,) = config.problems
    assert problem.variable == "ASK_ANOTHER_DATABASE_URL" and fragment in problem.message
    assert "s3cret-PW" not in str(problem)
    # Kept, with its problem: the store refuses to open rather than fall back to SQLite.
    assert config.database_url is not None and config.database_url.problem == problem.message


def test_a_bad_pool_size_is_a_problem_and_the_default_is_used():
    config = Config.from_env({"ASK_ANOTHER_DATABASE_URL": "postgresql://db/ask",
                              "ASK_ANOTHER_DATABASE_POOL_SIZE": "many"})
    assert [p.variable for p in config.problems] == ["ASK_ANOTHER_DATABASE_POOL_SIZE"]
    assert config.database_url is not None and config.database_url.pool_size == 10


def test_an_unparseable_database_url_still_gives_its_password_for_scrubbing():
    # urlsplit raises "Invalid IPv6 URL" on the unclosed bracket: reading the password raised
    # it too, a traceback at every start (doctor, serve) instead of the problem line.
    config = Config.from_env({"ASK_ANOTHER_DATABASE_URL": "postgresql://team:s3cret-PW@[db/ask"})
    (problem,) = config.problems
    assert "is not a valid URL" in problem.message and "s3cret-PW" not in str(problem)
    assert config.database_url is not None and config.database_url.password == "s3cret-PW"


def test_oauth_and_public_url_problems_are_reported():
    # They were parsed after the problems were frozen into the Config: silently ignored.
    config = Config.from_env({"ASK_ANOTHER_PUBLIC_URL": "ask.example.com",
                              "ASK_ANOTHER_OAUTH_ISSUER": "login.example.com"})
    assert {p.variable for p in config.problems} == {"ASK_ANOTHER_PUBLIC_URL",
                                                     "ASK_ANOTHER_OAUTH_ISSUER"}
    assert config.public_url is None and config.oauth is None


def test_a_quoted_model_variable_is_a_problem_not_a_model_named_with_a_quote():
    # What `docker run --env-file` passes for the line MODEL_GPT4="openai/gpt-4o;sk-...".
    config = Config.from_env({"MODEL_GPT4": '"openai/gpt-4o;sk-s3cret"',
                              "MODEL_SIM": "openai/m1;k"})
    assert [m.shorthand for m in config.models] == ["sim"]
    (problem,) = config.problems
    assert problem.variable == "MODEL_GPT4" and "without quotes" in problem.message
    assert "s3cret" not in str(problem)


@pytest.mark.parametrize("password", ["Ab/cd+ef==", "Ab?cd", "Ab#cd"])
def test_a_password_with_a_slash_is_never_shown_even_in_part(password: str):
    # A base64 password (openssl rand -base64) holds `/`: urlsplit read "Ab" as the port and its
    # error, quoted in the problem, showed it; the masked URL showed all of it.
    url = f"postgresql://ask:{password}@db.internal:5432/ask_another"
    config = Config.from_env({"ASK_ANOTHER_DATABASE_URL": url})
    (problem,) = config.problems
    assert "percent-encoded (/ as %2F, @ as %40)" in problem.message
    database = config.database_url
    assert database is not None
    assert database.shown == "postgresql://ask:****@db.internal:5432/ask_another"
    assert database.password == password  # registered for scrubbing whole
    assert "Ab" not in str(problem) + database.shown


def test_the_local_token_path_docs_deploy_shows_is_the_default_homes(
        monkeypatch: pytest.MonkeyPatch):
    # docs/deploy.md's --no-auth command read ~/.ask-another/local-token, a path that does not
    # exist (the default home is the platform's user state directory): the request got 401.
    import re

    from ask_another.server.tokens import LOCAL_TOKEN_FILE

    monkeypatch.setenv("HOME", "/home/you")
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    deploy = (Path(__file__).resolve().parents[2] / "docs" / "deploy.md").read_text()
    shown = re.findall(r"\$\(cat (~/[^)]+)\)", deploy)
    assert shown, "docs/deploy.md no longer shows the --no-auth command's token path"
    home = Config.from_env({}).home
    for path in shown:
        assert Path(path.replace("~", "/home/you", 1)) == home / LOCAL_TOKEN_FILE, path


def test_doctor_notes_a_padded_key_and_names_a_key_with_a_space_inside():
    notes, problems = key_notes({
        "MODEL_A": f"openai/gpt-4o; {KEY}", "MODEL_B": f"openai/gpt-4o;{KEY}\t;http://h",
        "MODEL_C": f"openai/gpt-4o;{KEY[:8]} {KEY[8:]}", "MODEL_D": "openai/gpt-4o;",
        "GEMINI_API_KEY": f"{KEY}\n", "MODEL_E": "nope", "PATH": " /bin "})
    assert notes == ["GEMINI_API_KEY ends with a space (as pasted?); it is sent without",
                     "MODEL_A: the API key starts with a space (as pasted?); it is sent without",
                     "MODEL_B: the API key ends with a space (as pasted?); it is sent without"]
    assert problems == ["MODEL_C: the API key has a space inside it; provider keys have none, "
                        "so the provider would refuse it (was it pasted in two pieces?)"]
    assert not any(KEY in text for text in notes + problems)


def test_the_gateway_trims_the_provider_key_variables_litellm_reads():
    environ = {"OPENAI_API_KEY": f" {KEY}", "ANTHROPIC_API_KEY": KEY, "PATH": " /bin ",
               "EMPTY_API_KEY": "  "}
    assert trim_provider_keys(environ) == ["OPENAI_API_KEY"]
    assert environ == {"OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": KEY, "PATH": " /bin ",
                       "EMPTY_API_KEY": "  "}
