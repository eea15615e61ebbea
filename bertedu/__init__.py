"""bertedu: learn BERT by building it.

    from bertedu import BertConfig, BertModel, BertForPreTraining
"""

from .config import BertConfig
from .encoder import BertModel
from .heads import BertForPreTraining
from .outputs import (
    BertModelOutput,
    BertPreTrainingOutput,
    QuestionAnsweringOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from .tasks import BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification

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
