from __future__ import annotations

import pytest

from ask_another.interaction import Policy, PolicyError
from ask_another.policy import ANY_SCOPE, rule_scope, scope_text


def test_default_allows_reads_and_asks_for_effects() -> None:
    policy = Policy.parse(None)
    assert policy.decide("read_article", "read") == "allow"
    assert policy.decide("send_mail", "effect") == "ask"


def test_tool_name_overrides_its_class() -> None:
    policy = Policy.parse("read=ask,read_article=allow,effect=deny,post_comment=ask")
    assert policy.decide("read_article", "read") == "allow"
    assert policy.decide("some_other_reader", "read") == "ask"
    assert policy.decide("post_comment", "effect") == "ask"
    assert policy.decide("delete_file", "effect") == "deny"


def test_unnamed_class_keeps_its_default() -> None:
    assert Policy.parse("effect=allow").decide("anything", "read") == "allow"
    assert Policy.parse("read=deny").decide("anything", "effect") == "ask"


def test_blank_pairs_and_spaces_are_tolerated() -> None:
    assert Policy.parse(" read = deny , ,effect=allow ") == Policy.parse("read=deny,effect=allow")


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("read", "'read'"),
        ("=allow", "'=allow'"),
        ("read=maybe", "'maybe'"),
        ("effect=allow,effect=deny", "'effect'"),
        ("x=allow,x=ask", "'x'"),
    ],
)
def test_malformed_policy_names_the_offending_pair(text: str, named: str) -> None:
    with pytest.raises(PolicyError, match=named):
        Policy.parse(text)


def test_str_round_trips() -> None:
    policy = Policy.parse("effect=deny,b_tool=ask,a_tool=allow")
    assert str(policy) == ("read=allow,effect=deny,internal=ask,after_internal=ask,"
                           "a_tool=allow,b_tool=ask")
    assert Policy.parse(str(policy)) == policy


def test_internal_classes_default_to_ask_and_no_tool_rule_opens_them() -> None:
    policy = Policy.parse("read_article=allow")
    assert policy.decide("read_article", "read") == "allow"
    assert policy.decide("read_article", "internal") == "ask"
    assert policy.decide("read_article", "after_internal") == "ask"
    opened = Policy.parse("internal=allow,after_internal=deny")
    assert opened.decide("read_article", "internal") == "allow"
    assert opened.decide("search_web", "after_internal") == "deny"


def test_standing_answers_apply_only_where_the_configured_policy_asks():
    configured = Policy.parse("read=ask,effect=ask,write_file=deny")
    person = configured.with_standing({("read_article", ANY_SCOPE): "allow",
                                       ("write_file", ANY_SCOPE): "allow",
                                       ("send_mail", ANY_SCOPE): "deny"})
    assert person.decide("read_article", "read") == "allow"
    assert person.decide("send_mail", "effect") == "deny"
    # What the configuration denies stays denied; the user's own hosts are asked every time.
    assert person.decide("write_file", "effect") == "deny"
    assert person.decide("read_article", "internal") == "ask"
    assert person.decide("read_article", "after_internal") == "ask"
    assert configured.decide("read_article", "read") == "ask"  # the configured one unchanged
    assert person != configured


def test_a_standing_answer_covers_its_tools_target_only():
    """Regression: *always allow* of one read covered every URL of every later job. A rule now
    covers the host of a read, the engine of a search, the exact arguments of another tool."""
    article = {"url": "https://Docs.Example.com/a?x=1"}
    note = {"text": "hello", "to": "team"}
    scopes = {"read_article": rule_scope("read_article", article),
              "search_web": rule_scope("search_web", {"query": "trio"}),
              "write_note": rule_scope("write_note", note)}
    assert scopes == {"read_article": "host:docs.example.com",
                      "search_web": "engine:configured",
                      "write_note": 'arguments:{"text":"hello","to":"team"}'}
    assert scope_text(scopes["read_article"]) == "reads of docs.example.com"
    person = Policy.parse("read=ask,effect=ask").with_standing(
        {(tool, scope): "allow" for tool, scope in scopes.items()})
    assert person.decide("read_article", "read", {"url": "https://docs.example.com/b"}) == \
        "allow"
    assert person.decide("read_article", "read", {"url": "https://other.example/a"}) == "ask"
    assert person.decide("search_web", "read", {"query": "anything else"}) == "allow"
    assert person.decide("write_note", "effect", {"to": "team", "text": "hello"}) == "allow"
    assert person.decide("write_note", "effect", {"text": "hello!", "to": "team"}) == "ask"
    assert person.decide("read_article", "read") == "ask"  # no arguments: no scoped rule
