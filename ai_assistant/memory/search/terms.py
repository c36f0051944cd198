"""
Terms of a text: its words, their stems (lemma, then the Snowball English stemmer), stop words.

Both the journal's index and the queries run through `tokenize`, so "painting", "painted" and
"paints" meet, and so do "went" and "go", and "promote" and "promotions".
`relevance_keyword_overlap` keeps the specification's plain word-overlap measure for comparison.
"""

import re
import threading

import snowballstemmer
from lemminflect import getAllLemmas

STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been before
    being below between both but by can cannot could couldn did didn do does doesn doing don
    down during each few for from further had hadn has hasn have haven having he her here hers
    herself him himself his how i if in into is isn it its itself just let me more most my
    myself no nor not of off on once only or other ought our ours ourselves out over own same
    shan she should shouldn so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was wasn we were weren what when
    where which while who whom why will with won would wouldn you your yours yourself
    yourselves s t ll re ve d m o y also get got ever really much many lot
    """.split()
)

_APOSTROPHE_S = re.compile(r"['’]s\b")
_APOSTROPHE = re.compile(r"['’]")
_WORD = re.compile(r"[a-z0-9]+")
# Stems by word. Process-wide: a word's stem is a pure function of the word, the same for
# every assistant, so sharing the table saves each assistant from re-stemming its vocabulary.
_STEM_CACHE = {}
_STEM_CACHE_MAX = 200_000
_LEMMA_ORDER = ("VERB", "NOUN", "ADJ", "ADV")
# A Snowball stemmer keeps its working state in the object: one per thread (the reactor's and
# the worker pool's searches stem at the same time).
_STEMMERS = threading.local()
# LemmInflect reads its tables on first use (~0.2 s): do it at import (server start), not in
# the first search on the reactor.
getAllLemmas("went")


def lemma(word):
    """
    The dictionary form of an English word ("went" -> "go", "bought" -> "buy", "children" ->
    "child"), from LemmInflect's lookup tables; the word itself when they do not know it.

    A word that can be several parts of speech takes its verb lemma first, then its noun
    lemma ("saw" -> "see", "painting" -> "paint"): in what people tell an assistant, the verb
    reading is the common one, and it is what a question about the deed needs.
    """
    found = getAllLemmas(word)
    for part_of_speech in _LEMMA_ORDER:
        if part_of_speech in found:
            return found[part_of_speech][0]
    return word


def stem(word):
    """
    The word's lemma (irregular forms included), then its Snowball (Porter2) English stem, so
    inflections and derivations meet: "painting", "painted" and "paints" all become "paint";
    "making", "made" and "make" all become "make"; "promotions" and "promote" become "promot".

    The lemma comes first because the stemmer knows no irregular forms ("went", "bought").
    Numbers are kept as they are.

    Args:
        word (str): A lower-case word.

    Returns:
        str: Its stem.
    """
    cached = _STEM_CACHE.get(word)
    if cached is not None:
        return cached
    original = word
    word = lemma(word).lower()
    if not word.isdigit():
        word = _stemmer().stemWord(word)
    if len(_STEM_CACHE) > _STEM_CACHE_MAX:
        _STEM_CACHE.clear()
    _STEM_CACHE[original] = word
    return word


def _stemmer():
    stemmer = getattr(_STEMMERS, "english", None)
    if stemmer is None:
        stemmer = _STEMMERS.english = snowballstemmer.stemmer("english")
    return stemmer


def words(text):
    """Lower-case words of `text`, possessive 's and apostrophes removed (no stemming)."""
    text = str(text).lower()
    if "'" in text or "’" in text:  # (most lines have none: two substitutions spared)
        text = _APOSTROPHE.sub("", _APOSTROPHE_S.sub("", text))
    return _WORD.findall(text)


def stems(found):
    """The stems of `found` words, in order (`stem` of each: the table read first, in line,
    since a recall tokenises a thousand texts the first time it meets them)."""
    cached = _STEM_CACHE.get
    return [cached(word) or stem(word) for word in found]


def tokenize(text):
    """
    Args:
        text (str): Any text.

    Returns:
        list[str]: Stemmed content words (stop words dropped), in order.
    """
    return stems([word for word in words(text) if word not in STOPWORDS])


def relevance_keyword_overlap(query, content):
    """
    The specification's relevance: the share of the query's words found in the content (split
    on whitespace, lower-cased, no other normalisation).

    Returns:
        float: 0.0-1.0.
    """
    query_words = set(str(query).lower().split())
    content_words = set(str(content).lower().split())
    return len(query_words & content_words) / max(len(query_words), 1)
