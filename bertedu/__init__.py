"""bertedu: learn BERT by building it.

    from bertedu import BertConfig, BertModel, BertForPreTraining
"""

from .model.config import BertConfig
from .model.encoder import BertModel
from .model.heads import BertForPreTraining
from .model.outputs import (
    BertModelOutput,
    BertPreTrainingOutput,
    QuestionAnsweringOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from .model.tasks import BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification

__all__ = [
    "BertConfig",
    "BertModel",
    "BertForPreTraining",
    "BertModelOutput",
    "BertPreTrainingOutput",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertForQuestionAnswering",
    "SequenceClassifierOutput",
    "TokenClassifierOutput",
    "QuestionAnsweringOutput",
]
__version__ = "0.1.0"
