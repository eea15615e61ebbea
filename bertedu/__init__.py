"""bertedu: learn BERT by building it.

    from bertedu import BertConfig, BertModel, BertForPreTraining
"""

from .config import BertConfig
from .encoder import BertModel
from .heads import BertForPreTraining
from .outputs import BertModelOutput, BertPreTrainingOutput

__all__ = ["BertConfig", "BertModel", "BertForPreTraining", "BertModelOutput", "BertPreTrainingOutput"]
__version__ = "0.1.0"
