"""Small built-in vocabularies so generated arguments look like real values.

A property called `city` should get "Lisbon", not "xkq"; a property called `age` should get
42, not 93817. Lists are kept deliberately short: realism, not coverage, is the goal. When the
prompt itself names a known value (e.g. "weather in Paris") that value is preferred.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

CITIES = (
    "Paris",
    "Tokyo",
    "Berlin",
    "New York",
    "Lisbon",
    "Toronto",
    "Sydney",
    "Nairobi",
    "London",
    "Madrid",
    "Seoul",
    "Chicago",
)
COUNTRIES = (
    "France",
    "Japan",
    "Germany",
    "United States",
    "Portugal",
    "Canada",
    "Australia",
    "Kenya",
    "Brazil",
    "India",
)
COUNTRY_CODES = ("FR", "JP", "DE", "US", "PT", "CA", "AU", "KE", "BR", "IN")
FIRST_NAMES = ("Alice", "Bob", "Carla", "David", "Emma", "Farid", "Grace", "Hiro", "Ines", "Jamal")
LAST_NAMES = ("Martin", "Smith", "Tanaka", "Silva", "Müller", "Okafor", "Garcia", "Kim")
STREETS = ("12 Rue de Rivoli", "221B Baker Street", "5 Avenida da Liberdade", "350 Fifth Avenue")
CURRENCIES = ("USD", "EUR", "JPY", "GBP", "CAD", "AUD")
LANGUAGES = ("en", "fr", "de", "ja", "pt", "es")
COLORS = ("red", "blue", "green", "black", "white", "orange")
UNITS = ("metric", "imperial")
TICKERS = ("AAPL", "MSFT", "GOOG", "AMZN", "TSLA", "NVDA")
STATUSES = ("active", "pending", "completed", "cancelled")
DOMAINS = ("example.com", "example.org", "example.net")


def _pick_known(options: Sequence[str], context: Sequence[str], rng: random.Random) -> str:
    """The first of `options` the prompt mentions (usually), else a random option."""
    joined = " " + " ".join(word.lower() for word in context) + " "
    mentioned = sorted(
        (joined.find(f" {option.lower()} "), option)
        for option in options
        if f" {option.lower()} " in joined
    )
    if mentioned:
        return mentioned[0][1] if rng.random() < 0.8 else rng.choice(mentioned)[1]
    return rng.choice(list(options))


def person_name(rng: random.Random) -> str:
    return f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"


def email(rng: random.Random) -> str:
    first = rng.choice(FIRST_NAMES).lower()
    last = rng.choice(LAST_NAMES).lower().replace("ü", "u")
    return f"{first}.{last}@{rng.choice(DOMAINS)}"


def url(rng: random.Random, context: Sequence[str] = ()) -> str:
    slug = "-".join(word.lower() for word in context[:2]) or rng.choice(("docs", "items", "home"))
    return f"https://www.{rng.choice(DOMAINS)}/{slug}"


def date(rng: random.Random) -> str:
    return f"{rng.randint(2021, 2026):04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def time_of_day(rng: random.Random) -> str:
    """An RFC 3339 full-time, as JSON Schema's `time` format requires (offset included)."""
    return f"{clock_time(rng)}:00Z"


def clock_time(rng: random.Random) -> str:
    return f"{rng.randint(7, 21):02d}:{rng.choice((0, 15, 30, 45)):02d}"


def date_time(rng: random.Random) -> str:
    return f"{date(rng)}T{time_of_day(rng)}"


def phone(rng: random.Random) -> str:
    return f"+1-555-{rng.randint(100, 999):03d}-{rng.randint(1000, 9999):04d}"


def phrase(context: Sequence[str], rng: random.Random, size: int = 3) -> str:
    """A few prompt words in prompt order (a plausible search query or title)."""
    if not context:
        return rng.choice(("latest news", "project update", "weekly report", "getting started"))
    start = rng.randint(0, max(0, len(context) - size))
    return " ".join(context[start : start + size])


def identifier(rng: random.Random, context: Sequence[str] = ()) -> str:
    stem = rng.choice([word.lower() for word in context] or ["item"])
    return f"{stem[:12]}-{rng.randint(100, 9999)}"


StringMaker = Callable[[random.Random, Sequence[str]], str]

CITY_WORDS = frozenset({"city", "location", "town", "destination", "origin"})
COUNTRY_WORDS = frozenset({"country", "nation"})
CURRENCY_WORDS = frozenset({"currency"})
TICKER_WORDS = frozenset({"symbol", "ticker", "stock"})

# Property-name words whose values come from one of the closed lists above.
KNOWN_VALUES: tuple[tuple[frozenset[str], Sequence[str]], ...] = (
    (CITY_WORDS, CITIES),
    (COUNTRY_WORDS, COUNTRIES),
    (CURRENCY_WORDS, CURRENCIES),
    (TICKER_WORDS, TICKERS),
)

# Checked in order against the words of a property name; the first hit wins.
STRING_HINTS: tuple[tuple[frozenset[str], StringMaker], ...] = (
    (frozenset({"email", "mail"}), lambda rng, ctx: email(rng)),
    (
        frozenset({"url", "uri", "link", "website", "href", "homepage"}),
        lambda rng, ctx: url(rng, ctx),
    ),
    (frozenset({"datetime", "timestamp"}), lambda rng, ctx: date_time(rng)),
    (frozenset({"date", "day", "birthday", "dob", "since", "until"}), lambda rng, ctx: date(rng)),
    (frozenset({"time"}), lambda rng, ctx: clock_time(rng)),
    (CITY_WORDS, lambda rng, ctx: _pick_known(CITIES, ctx, rng)),
    (COUNTRY_WORDS, lambda rng, ctx: _pick_known(COUNTRIES, ctx, rng)),
    (frozenset({"phone", "mobile", "tel", "telephone"}), lambda rng, ctx: phone(rng)),
    (frozenset({"address", "street"}), lambda rng, ctx: rng.choice(STREETS)),
    (
        frozenset({"zip", "postal", "postcode", "zipcode"}),
        lambda rng, ctx: f"{rng.randint(10000, 99999)}",
    ),
    (CURRENCY_WORDS, lambda rng, ctx: _pick_known(CURRENCIES, ctx, rng)),
    (frozenset({"language", "lang", "locale"}), lambda rng, ctx: rng.choice(LANGUAGES)),
    (frozenset({"color", "colour"}), lambda rng, ctx: rng.choice(COLORS)),
    (frozenset({"unit", "units"}), lambda rng, ctx: rng.choice(UNITS)),
    (TICKER_WORDS, lambda rng, ctx: _pick_known(TICKERS, ctx, rng)),
    (frozenset({"status", "state"}), lambda rng, ctx: rng.choice(STATUSES)),
    (
        frozenset({"username", "user", "login", "handle"}),
        lambda rng, ctx: f"{rng.choice(FIRST_NAMES).lower()}{rng.randint(1, 99)}",
    ),
    (
        frozenset({"author", "person", "contact", "owner", "recipient", "fullname", "customer"}),
        lambda rng, ctx: person_name(rng),
    ),
    (
        frozenset({"file", "filename", "path", "filepath"}),
        lambda rng, ctx: f"/data/{(rng.choice(list(ctx)) if ctx else 'report').lower()}.txt",
    ),
    (
        # An answer for a person (ToolLLM's `final_answer`) is a sentence, never a bare schema word.
        frozenset({"answer", "reply"}),
        lambda rng, ctx: f"Here is what I found: {phrase([w for w in ctx if w.isalpha()], rng, size=6)}.",
    ),
    (
        frozenset({"id", "uuid", "key", "code", "ref", "reference", "sku"}),
        lambda rng, ctx: identifier(rng, ctx),
    ),
    (
        frozenset(
            {
                "query",
                "q",
                "search",
                "keyword",
                "keywords",
                "term",
                "topic",
                "title",
                "subject",
                "text",
                "message",
                "content",
                "description",
                "prompt",
                "body",
                "comment",
                "note",
                "summary",
            }
        ),
        lambda rng, ctx: phrase(ctx, rng),
    ),
)

# (property-name words, low, high): realistic numeric ranges.
NUMBER_HINTS: tuple[tuple[frozenset[str], float, float], ...] = (
    (frozenset({"age"}), 18, 80),
    (frozenset({"year"}), 2000, 2026),
    (frozenset({"month"}), 1, 12),
    (frozenset({"day"}), 1, 28),
    (frozenset({"hour"}), 0, 23),
    (frozenset({"minute", "minutes"}), 0, 59),
    (frozenset({"page"}), 1, 5),
    (
        frozenset(
            {
                "count",
                "limit",
                "num",
                "number",
                "size",
                "results",
                "top",
                "k",
                "n",
                "max",
                "quantity",
                "qty",
            }
        ),
        1,
        20,
    ),
    (frozenset({"price", "amount", "cost", "total", "budget", "salary"}), 5, 500),
    (frozenset({"lat", "latitude"}), -90, 90),
    (frozenset({"lon", "lng", "longitude"}), -180, 180),
    (frozenset({"rating", "stars", "score"}), 1, 5),
    (frozenset({"percent", "percentage", "pct", "probability"}), 0, 100),
    (frozenset({"temperature", "temp"}), -10, 35),
    (frozenset({"days", "nights", "guests", "adults", "people", "passengers", "rooms"}), 1, 7),
)


_PERSON_NAME_WORDS = frozenset({"name", "first", "last", "full", "display", "given", "family"})
# Words of sibling properties that make a bare `name` a person's (name + email, name + age, …);
# otherwise a `name` names a thing (a domain, a product, an API) and gets a short title.
PERSON_CONTEXT = frozenset({
    "age", "email", "mail", "phone", "mobile", "birthday", "birth", "dob", "gender", "nationality", "passport",
    "first", "last", "surname", "guest", "passenger", "employee", "patient", "student", "attendee", "contact",
})
NAMED_THING = "named-thing"  # the word list of a bare `name` whose object is not a person


def thing_name(rng: random.Random, context: Sequence[str]) -> str:
    """One or two of the prompt's longer words, capitalised ones first ("Weather", "Finance Travel")."""
    words = list(dict.fromkeys(w.strip(",.:;") for w in context))
    words = [w for w in words if w.isalpha() and len(w) > 3]
    pool = [w for w in words if w[0].isupper()] or words or ["General"]
    return " ".join(w.capitalize() for w in rng.sample(pool, min(len(pool), rng.randint(1, 2))))


def describes_person(property_words: Sequence[str]) -> bool:
    """Whether an object with properties of these words is a person."""
    return bool(PERSON_CONTEXT & set(property_words))


def string_hint(name_words: Sequence[str]) -> StringMaker | None:
    """The string maker for a property whose name has these (lower-case) words, if any."""
    names = set(name_words)
    if names == {NAMED_THING}:
        return thing_name
    if "name" in names and names <= _PERSON_NAME_WORDS:
        if names & {"first", "given"}:
            return lambda rng, ctx: rng.choice(FIRST_NAMES)
        if names & {"last", "family"}:
            return lambda rng, ctx: rng.choice(LAST_NAMES)
        return lambda rng, ctx: person_name(rng)
    for keys, maker in STRING_HINTS:
        if names & keys:
            return maker
    return None


def number_hint(name_words: Sequence[str]) -> tuple[float, float] | None:
    """A realistic (low, high) range for a numeric property with these name words, if any."""
    names = set(name_words)
    for keys, low, high in NUMBER_HINTS:
        if names & keys:
            return (low, high)
    return None


def known_values(name_words: Sequence[str]) -> Sequence[str]:
    """The closed list of values (cities, currencies, ...) a property with these words takes."""
    names = set(name_words)
    for keys, values in KNOWN_VALUES:
        if names & keys:
            return values
    return ()
