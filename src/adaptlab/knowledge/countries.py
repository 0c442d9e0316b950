"""The built-in fact set: countries' capital, region, subregion, currency and language.

Read from the countryinfo package's data/*.json (one file per country). Currencies and
languages are ISO codes there; the names below cover the common ones, and facts whose code
has no name here are left out. Every template ends with [Y], so causal LMs can use them.
"""

from __future__ import annotations

import json

from adaptlab.errors import DataError
from adaptlab.knowledge.facts import Fact, FactSet, make_fact_set
from adaptlab.models.builtin import package_folder

PACKAGE = "countryinfo==1.0.1"

TEMPLATES: dict[str, list[str]] = {
    "capital": [
        "The capital of [X] is [Y]",
        "The capital city of [X] is [Y]",
        "[X]'s capital is [Y]",
        "[X]'s capital city is [Y]",
    ],
    "region": [
        "[X] is a country in [Y]",
        "[X] is located in [Y]",
        "The country of [X] lies in [Y]",
    ],
    "subregion": [
        "[X] is a country in the region of [Y]",
        "Geographically, [X] belongs to [Y]",
        "The region of the world where [X] lies is [Y]",
    ],
    "currency": [
        "The currency of [X] is the [Y]",
        "The official currency of [X] is the [Y]",
        "In [X], people pay with the [Y]",
    ],
    "language": [
        "The official language of [X] is [Y]",
        "In [X], most people speak [Y]",
        "The main language spoken in [X] is [Y]",
    ],
}

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

BUILTIN_SETS = ("countries",)


def builtin_facts(name: str) -> FactSet:
    """The built-in fact set `name` (only `countries`)."""
    if name not in BUILTIN_SETS:
        raise DataError(f"no built-in fact set {name!r}; built-ins: builtin:countries")
    folder = package_folder("countryinfo")
    if folder is None or not (folder / "data").is_dir():
        raise DataError(f"builtin:countries needs its package: pip install --no-deps {PACKAGE}")
    facts = []
    for path in sorted((folder / "data").glob("*.json")):
        info = json.loads(path.read_text(encoding="utf-8"))
        facts.extend(country_facts(info))
    return make_fact_set("builtin:countries", facts, TEMPLATES)


def country_facts(info: dict[str, object]) -> list[Fact]:
    """The facts one countryinfo record gives (empty or unnamed values are left out)."""
    name = str(info.get("name") or "").strip()
    if not name:
        return []
    currencies = info.get("currencies") or []
    languages = info.get("languages") or []
    values = {
        "capital": str(info.get("capital") or "").strip(),
        "region": str(info.get("region") or "").strip(),
        "subregion": str(info.get("subregion") or "").strip(),
        "currency": CURRENCIES.get(str(currencies[0]), "")
        if isinstance(currencies, list) and currencies
        else "",
        "language": LANGUAGES.get(str(languages[0]), "")
        if isinstance(languages, list) and languages
        else "",
    }
    return [Fact(name, relation, value) for relation, value in values.items() if value]
