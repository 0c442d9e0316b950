"""`countries-qa`: closed-book questions about countries, read from the countryinfo package's
data/*.json (one file per country): capital, region, subregion, currency and main language,
three or four phrasings of the question per relation, each answered by one short name.

countryinfo stores currencies and languages as ISO codes: a country's first listed one is
named by the tables below (which `adaptlab.knowledge.countries` shares), and a fact whose code
has no name there is left out, as are empty facts. The split is by country, so no country asked
about in dev or test is seen in training.
"""

from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path

from adaptlab.data.builtin import package_files
from adaptlab.data.generative import GenerativeCorpus, PromptCompletion, cued
from adaptlab.data.splits import SPLIT_SEED, three_way_split
from adaptlab.data.types import SPLIT_NAMES, Origin
from adaptlab.errors import DataError
from adaptlab.jsonfile import read_json_file

NAME = "countries-qa"
PIP = "countryinfo==1.0.1"
INSTALL = f"pip install --no-deps {PIP}"
SUMMARY = (
    "closed-book questions on countries' capital, region, subregion, currency and main "
    "language, split by country (countryinfo)"
)

CURRENCIES = {
    "EUR": "euro", "USD": "US dollar", "AUD": "Australian dollar", "XCD": "East Caribbean dollar",
    "XOF": "CFA franc", "XAF": "CFA franc", "NZD": "New Zealand dollar", "GBP": "pound",
    "XPF": "CFP franc", "DKK": "Danish krone", "ILS": "shekel", "NOK": "Norwegian krone",
    "MAD": "dirham", "INR": "rupee", "LKR": "rupee", "NGN": "naira", "JPY": "yen",
    "JMD": "Jamaican dollar", "PLN": "zloty", "EGP": "Egyptian pound", "IDR": "rupiah",
    "ISK": "krona", "GEL": "lari", "CRC": "colón", "TWD": "New Taiwan dollar", "KWD": "dinar",
    "GHS": "cedi", "IRR": "rial", "CNY": "yuan", "RUB": "ruble", "CHF": "Swiss franc",
    "SEK": "Swedish krona", "BRL": "real", "MXN": "peso", "ARS": "peso", "CLP": "peso",
    "COP": "peso", "PHP": "peso", "KRW": "won", "TRY": "lira", "ZAR": "rand", "THB": "baht",
    "VND": "dong", "UAH": "hryvnia", "HUF": "forint", "CZK": "koruna", "CAD": "Canadian dollar",
    "SAR": "riyal", "QAR": "riyal", "PKR": "rupee", "BDT": "taka", "KES": "shilling",
}  # fmt: skip
"""Names of the common ISO 4217 currency codes countryinfo uses."""

LANGUAGES = {
    "en": "English", "fr": "French", "es": "Spanish", "ar": "Arabic", "pt": "Portuguese",
    "de": "German", "nl": "Dutch", "it": "Italian", "zh": "Chinese", "no": "Norwegian",
    "el": "Greek", "ro": "Romanian", "ko": "Korean", "hi": "Hindi", "ja": "Japanese",
    "pl": "Polish", "he": "Hebrew", "id": "Indonesian", "is": "Icelandic", "ka": "Georgian",
    "uz": "Uzbek", "bs": "Bosnian", "km": "Khmer", "fi": "Finnish", "mt": "Maltese",
    "fa": "Persian", "uk": "Ukrainian", "sv": "Swedish", "sk": "Slovak", "ga": "Irish",
    "mn": "Mongolian", "et": "Estonian", "mk": "Macedonian", "kk": "Kazakh", "da": "Danish",
    "ru": "Russian", "tr": "Turkish", "hu": "Hungarian", "cs": "Czech", "sr": "Serbian",
    "hr": "Croatian", "bg": "Bulgarian", "lt": "Lithuanian", "lv": "Latvian", "sl": "Slovenian",
    "th": "Thai", "vi": "Vietnamese", "ms": "Malay", "sw": "Swahili", "am": "Amharic",
    "bn": "Bengali", "ur": "Urdu", "hy": "Armenian", "az": "Azerbaijani", "sq": "Albanian",
}  # fmt: skip
"""Names of the common ISO 639-1 language codes countryinfo uses."""

QUESTIONS: dict[str, tuple[str, ...]] = {
    "capital": (
        "What is the capital of {country}?",
        "Which city is the capital of {country}?",
        "What is the capital city of {country}?",
        "Name the capital of {country}.",
    ),
    "region": (
        "In which region of the world is {country}?",
        "Which world region does {country} belong to?",
        "{country} is in which region of the world?",
    ),
    "subregion": (
        "In which subregion of the world is {country}?",
        "Which subregion does {country} belong to?",
        "{country} lies in which subregion of the world?",
    ),
    "currency": (
        "What is the currency of {country}?",
        "Which currency is used in {country}?",
        "What do people in {country} pay with?",
    ),
    "language": (
        "What is the main language of {country}?",
        "Which language is mainly spoken in {country}?",
        "What language do most people in {country} speak?",
    ),
}
"""The questions asked of each relation; `{country}` is the country's name."""


def _first_name(codes: object, names: Mapping[str, str]) -> str:
    """The name of the first code in a countryinfo list of codes; empty when there is none or
    the table does not name it."""
    if not isinstance(codes, list) or not codes:
        return ""
    return names.get(str(codes[0]), "")


def country_relations(info: Mapping[str, object]) -> dict[str, str]:
    """A countryinfo record's capital, region, subregion, currency and language, as names;
    empty or unnamed values are left out."""
    values = {
        "capital": str(info.get("capital") or "").strip(),
        "region": str(info.get("region") or "").strip(),
        "subregion": str(info.get("subregion") or "").strip(),
        "currency": _first_name(info.get("currencies"), CURRENCIES),
        "language": _first_name(info.get("languages"), LANGUAGES),
    }
    return {relation: value for relation, value in values.items() if value}


def questions(country: str, relations: Mapping[str, str]) -> list[PromptCompletion]:
    """Every phrasing of every question a country's known relations answer."""
    return [
        cued(template.format(country=country), relations[relation])
        for relation, templates in QUESTIONS.items()
        if relation in relations
        for template in templates
    ]


def countries_corpus(records: Sequence[tuple[str, Mapping[str, object]]]) -> GenerativeCorpus:
    """The corpus from countryinfo records (each with its file's name), in file order.

    A country is its name: a name in several files counts once, from its first file. Countries
    with at least one fact are split 80/10/10 by the fixed stratified rule (`three_way_split`),
    stratified by region, and every question about a country goes to its split."""
    countries: dict[str, tuple[str, dict[str, str]]] = {}
    for file, info in records:
        name = str(info.get("name") or "").strip()
        relations = country_relations(info)
        if name and relations and name not in countries:
            countries[name] = (file, relations)
    if len(countries) < 3:
        raise DataError(f"{NAME} needs countries to split; reinstall its package: {INSTALL}")
    names = list(countries)
    parts = three_way_split([countries[name][1].get("region", "") for name in names])
    splits, origins = {}, {}
    for split, indices in zip(SPLIT_NAMES, parts, strict=True):
        examples: list[PromptCompletion] = []
        where: list[Origin | None] = []
        for index in indices:
            file, relations = countries[names[index]]
            asked = questions(names[index], relations)
            examples.extend(asked)
            where.extend([Origin(file, 1)] * len(asked))
        splits[split], origins[split] = tuple(examples), tuple(where)
    sizes = "/".join(str(len(parts[i])) for i in range(3))
    description = (
        f"built-in {NAME}: {SUMMARY}; files data/*.json of {PIP}; {len(names)} countries split "
        f"80/10/10 by country ({sizes}; stratified by region, seed {SPLIT_SEED}), "
        f"{sum(map(len, QUESTIONS.values()))} question phrasings over {len(QUESTIONS)} relations"
    )
    return GenerativeCorpus(NAME, splits, description, origins)


def country_record(path: Path) -> Mapping[str, object]:
    """One countryinfo file's record (a JSON object); one line naming the file otherwise."""
    record = read_json_file(path, DataError)
    if not isinstance(record, dict):
        raise DataError(f"{path}: not a countryinfo record (a JSON object); reinstall: {INSTALL}")
    return record


def country_records(folder: Path) -> list[tuple[str, Mapping[str, object]]]:
    """Every countryinfo record in `folder` with its file's name, in file-name order."""
    return [(path.name, country_record(path)) for path in sorted(folder.glob("*.json"))]


@lru_cache(maxsize=1)
def _cached(folder: Path) -> GenerativeCorpus:
    """The corpus read once per process from the package's data folder."""
    return countries_corpus(country_records(folder))


def load_countries_qa() -> GenerativeCorpus:
    """`countries-qa` from the installed countryinfo package."""
    (folder,) = package_files(NAME, "countryinfo", PIP, ("data",))
    return _cached(folder)
