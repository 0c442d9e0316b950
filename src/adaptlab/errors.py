"""User-facing errors: each carries one line that names the culprit and what to do."""


class AdaptlabError(Exception):
    """An error the user can cause and fix; the CLI prints its message alone and exits 1."""


class ConfigError(AdaptlabError):
    """A method, study or command option has a bad value or combination."""


class BackboneError(AdaptlabError):
    """A part of the transformer (blocks, attention output, FFN, norms) could not be found."""


class AdapterFileError(AdaptlabError):
    """An adapter folder is missing, corrupt, or does not fit the base model."""


class ModelNotFoundError(AdaptlabError):
    """A model name or folder cannot be resolved offline."""


class DataError(AdaptlabError):
    """A data file or built-in corpus cannot be read as asked."""


def one_line(error: BaseException) -> str:
    """The first line of an error's message, or its type name when it has none."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
