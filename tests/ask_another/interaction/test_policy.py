from __future__ import annotations

import pytest

from ask_another.interaction import Policy, PolicyError


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
    person = configured.with_standing({"read_article": "allow", "write_file": "allow",
                                       "send_mail": "deny"})
    assert person.decide("read_article", "read") == "allow"
    assert person.decide("send_mail", "effect") == "deny"
    # What the configuration denies stays denied; the user's own hosts are asked every time.
    assert person.decide("write_file", "effect") == "deny"
    assert person.decide("read_article", "internal") == "ask"
    assert person.decide("read_article", "after_internal") == "ask"
    assert configured.decide("read_article", "read") == "ask"  # the configured one unchanged
    assert person != configured
