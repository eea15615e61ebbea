"""bertedu: learn BERT by building it.

    from bertedu import BertConfig, BertModel, BertForPreTraining

The names below load on first use (PEP 562), so `bertedu --help` answers without importing
torch; `from bertedu import X` and `bertedu.X` work as for any module.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what the names are, for readers, type checkers and tests/test_imports.py's graph
    from .model.config import BertConfig
    from .model.encoder import BertModel
    from .model.heads import BertForPreTraining
    from .model.outputs import (BertModelOutput, BertPreTrainingOutput, QuestionAnsweringOutput,
                                SequenceClassifierOutput, TokenClassifierOutput)
    from .model.tasks import BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification

_EXPORTS = {
    "BertConfig": ".model.config",
    "BertModel": ".model.encoder",
    "BertForPreTraining": ".model.heads",
    "BertModelOutput": ".model.outputs",
    "BertPreTrainingOutput": ".model.outputs",
    "BertForSequenceClassification": ".model.tasks",
    "BertForTokenClassification": ".model.tasks",
    "BertForQuestionAnswering": ".model.tasks",
    "SequenceClassifierOutput": ".model.outputs",
    "TokenClassifierOutput": ".model.outputs",
    "QuestionAnsweringOutput": ".model.outputs",
}
__all__ = list(_EXPORTS)
__version__ = "0.1.0"


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
        globals()[name] = value  # later lookups find it directly
        return value
    raise AttributeError(f"module 'bertedu' has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | set(_EXPORTS))
