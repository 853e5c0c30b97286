"""Reading web articles for a model: safe fetching and trafilatura extraction.

``read_article(url)`` is the one entry point; the constants describe it as a tool and state its
limits. See docs/articles.md for the safety rules and ``ASK_ANOTHER_ALLOW_HOSTS``.
"""

from ._addresses import ALLOW_HOSTS_SETTING as ALLOW_HOSTS_SETTING
from ._addresses import url_is_allowed as url_is_allowed
from ._read import CONTENT_CAP as CONTENT_CAP
from ._read import DEFAULT_MAX_BYTES as DEFAULT_MAX_BYTES
from ._read import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
from ._read import MAX_REDIRECTS as MAX_REDIRECTS
from ._read import READ_ARTICLE_DESCRIPTION as READ_ARTICLE_DESCRIPTION
from ._read import READ_ARTICLE_NAME as READ_ARTICLE_NAME
from ._read import READ_ARTICLE_PARAMETERS as READ_ARTICLE_PARAMETERS
from ._read import read_article as read_article

__all__ = [
    "ALLOW_HOSTS_SETTING",
    "CONTENT_CAP",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_TIMEOUT",
    "MAX_REDIRECTS",
    "READ_ARTICLE_DESCRIPTION",
    "READ_ARTICLE_NAME",
    "READ_ARTICLE_PARAMETERS",
    "read_article",
    "url_is_allowed",
]
