"""The teaching pictures' labels in Chinese: one table, English -> 中文, in the terms of docs/glossary.md.

    translate(text)   `text` in Chinese when the table has it (whole, or by a pattern), else unchanged

A row of `LABELS` is (English, 中文). The English side is a label as a picture writes it, with
`{}` where the picture puts a value (a number, a size, a model's name: matched by anything) and
`{n}` where it puts a number, and `{=}` where the value is a code name that stays as it is (a
module of a state dict); the Chinese
side puts the values back by position, `{0}`, `{1}`, ... A `{}` value is itself translated when the
table has it ("6 layers (H = 384)" -> "6 层 (H = 384)"), so a title is translated piece by piece.
Numbers, symbols (Q, K, V, L, H, d_k), special tokens ([CLS], [MASK]) and names (BERT-BASE,
all-MiniLM-L6-v2, WordPiece, GELU, softmax, logits) stay as they are. tests/test_pictures_zh.py
checks that every glossary term of an English label has the glossary's Chinese on the other side,
and that no picture keeps an English word the table missed.

`drawing.translate_labels` applies it to a picture when the course speaks Chinese (`i18n`).
Introduced for the Chinese edition (notebooks/zh/).
"""

from __future__ import annotations

import re
from functools import lru_cache

# The lessons' names on the map (`diagrams.LESSON_TITLES`).
LESSON_TITLES = [
    ("the whole course", "课程全貌"), ("tokenization", "词元化"), ("embeddings", "嵌入"),
    ("self-attention", "自注意力"), ("the encoder", "编码器"), ("pretraining data", "预训练数据"),
    ("pretraining", "预训练"), ("pretraining at scale", "大规模预训练"),
    ("single-sentence classification", "单句分类"), ("token tagging", "词元标注"), ("sentence pairs", "句子对分类"),
    ("extractive QA", "抽取式问答"), ("speed", "速度"), ("long inputs", "长输入"), ("BERT vs GPT", "BERT 与 GPT"),
    ("Chinese whole-word masking", "中文全词掩蔽"),
]

# The map (`diagrams.you_are_here`) and the model's names and sizes every picture uses (`drawing`).
MAP = [
    ("you are here: {} · {}\n{}: {}", "当前位置：{0} · {1}\n{2}：{3}"),
    ("{n} layers (H = {n})", "{0} 层 (H = {1})"),
    ("text: “{}”", "文本：“{0}”"),
    ("text: a Chinese sentence (People's Daily)", "文本：一句中文（人民日报）"),
    ("{} tokens: {}\n(V = {})", "{0} 词元：{1}\n(V = {2})"),
    ("tokens: {}\n(V = {})", "词元：{0}\n(V = {1})"),
    ("byte-level BPE", "字节级 BPE"),
    ("[CLS] one piece per character [SEP]", "[CLS] 每个汉字一个词元 [SEP]"),
    ("embeddings: {}\n({})", "嵌入：{0}\n({1})"),
    ("token + segment + position", "词元 + 片段 + 位置"),
    ("token + position", "词元 + 位置"),
    ("token + position (+ one segment row, always 0)", "词元 + 位置（另有一行片段嵌入，恒为 0）"),
    ("E = {}, projected to H = {}", "E = {0}，再投影到 H = {1}"),
    ("self-attention\n(A = {n} heads)", "自注意力\n（A = {0} 个头）"),
    ("causal self-attention\n(A = {n} heads)", "因果自注意力\n（A = {0} 个头）"),
    ("feed-forward\n({} → {} → {})", "前馈网络\n({0} → {1} → {2})"),
    ("× L = {n}\nlayers,\nresidual +\nLayerNorm", "× L = {0} 层\n残差连接\n+ 层规范化"),
    ("one layer,\nlooped\nL = {n} times\n(shared\nweights)", "同一层\n循环 L = {0} 次\n（跨层参数共享）"),
    ("pretraining heads\nMLM + NSP", "预训练输出层\n掩蔽语言模型\n+ 下一句预测"),
    ("pretraining head\nMLM only (no NSP)", "预训练输出层\n仅掩蔽语言模型\n（无下一句预测）"),
    ("pretraining heads\nMLM + sentence order", "预训练输出层\n掩蔽语言模型\n+ 句子顺序预测"),
    ("no MLM or NSP head\n(as shipped)", "发布时不带掩蔽语言模型\n和下一句预测的输出层"),
    ("distilled from a teacher\n(no pooler, no NSP)", "从教师模型蒸馏而来\n（无池化层，无下一句预测）"),
    ("next-token head\n(no MLM, no NSP)", "预测下一个词元的输出层\n（无掩蔽语言模型和下一句预测）"),
    ("fine-tuning heads\nclass · tag · pair · QA", "微调输出层\n分类 · 标注 · 句对 · 问答"),
]

# The input, attention and the encoder (`diagrams`: input_representation, attention_flow, encoder_blocks).
ENCODER = [
    ("input", "输入"), ("token", "词元"), ("segment", "片段"), ("position", "位置"),
    ("sum, then LayerNorm and dropout → the encoder", "求和，再经层规范化和暂退法 → 编码器"),
    ("one of N = {n} heads (d_k = D / N = {n})", "N = {0} 个头中的一个 (d_k = D / N = {1})"),
    ("scores\nQ Kᵀ / √d_k  (T, T)", "分数\nQ Kᵀ / √d_k  (T, T)"),
    ("causal mask:\nno key after\nthe query", "因果掩码：\n查询之后的\n键都看不到"),
    ("padding mask:\n-inf at [PAD]\nkeys", "填充掩码：\n[PAD] 处的键\n分数置为 -inf"),
    ("softmax\nover keys", "在所有键上\n做 softmax"),
    ("probs · V\n(T, {})\nconcat N heads,\n· W_O → (T, {})", "概率 · V\n(T, {0})\n拼接 N 个头，\n· W_O → (T, {1})"),
    ("one encoder layer, repeated L = {n} times", "一个编码器层，重复 L = {0} 次"),
    ("post-LN (BERT)", "后置层规范化（BERT）"),
    ("pre-LN (GPT-2, later BERTs)", "前置层规范化（GPT-2 及后来的 BERT）"),
    ("multi-head attention ({n})", "多头注意力（{0} 个头）"),
    ("feed-forward {}→{}→{}", "前馈网络 {0}→{1}→{2}"),
    ("LayerNorm", "层规范化"),
]

# The heads (`diagrams`: pretraining_heads, task_heads).
HEADS = [
    ("{} encoder\nembeddings + {}", "{0} 编码器\n嵌入 + {1}"),
    ("pooler: dense + tanh\n→ NSP: 2 logits", "池化层：全连接 + tanh\n→ 下一句预测：2 个 logits"),
    ("MLM head: dense, GELU,\nLayerNorm → decoder", "掩蔽语言模型输出层：\n全连接、GELU、\n层规范化 → 解码器"),
    ("V = {} logits at each masked position;\nthe decoder is the word-embedding matrix, transposed (tied)",
     "每个被掩蔽的位置输出 V = {0} 个 logits；\n解码器就是词元嵌入矩阵的转置（权重绑定）"),
    ("no loss at\nother positions", "其他位置\n不计损失"),
    ("single sentence → one label", "单句 → 一个标签"),
    ("sentence pair → one label", "句子对 → 一个标签"),
    ("one label per word (first piece)", "每个词一个标签（取第一个子词）"),
    ("question + passage → answer span", "问题 + 段落 → 答案所在的文本片段"),
    ("pooled [CLS]\n→ K labels", "[CLS] 池化向量\n→ K 个标签"),
    ("[CLS]'s vector\n→ K labels", "[CLS] 的向量\n→ K 个标签"),
    ("start\nend", "起点\n终点"),
    ("no answer\nin the question", "答案不在\n问题里"),
]

# The family (`diagrams`: family_differences, albert_factorised).
FAMILY = [
    ("vocabulary", "词表"), ("segments", "片段"), ("positions", "位置"), ("encoder", "编码器"),
    ("data and batch", "数据与批量"), ("pooler", "池化层"), ("the same", "相同"), ("none", "无"),
    ("WordPiece, 30k, [UNK]", "WordPiece，30k，有 [UNK]"), ("WordPiece, 30k", "WordPiece，30k"),
    ("SentencePiece, 30k", "SentencePiece，30k"),
    ("byte-level BPE, 50k,\nno unknown token", "字节级 BPE，50k，\n没有未知词元"),
    ("{n} segment embeddings", "{0} 种片段嵌入"),
    ("1 (pairs marked by </s></s>)", "1 种（句对以 </s></s> 分隔）"),
    ("none (pairs marked by [SEP])", "无（句对以 [SEP] 分隔）"),
    ("offset past the padding id", "编号从填充词元的 id 之后开始"),
    ("L post-LN layers", "L 层，后置层规范化"),
    ("MLM + NSP, static masks", "掩蔽语言模型 + 下一句预测，\n静态掩蔽"),
    ("MLM only, dynamic masks,\nfull sentences", "仅掩蔽语言模型，动态掩蔽，\n输入为完整句子"),
    ("{n} GB, batch {}", "{0} GB，批量 {1}"),
    ("V x E, then E x H (E = {})", "V x E，再 E x H (E = {0})"),
    ("L layers, own weights", "L 层，各有各的权重"),
    ("L layers, ONE set of weights", "L 层，共用同一套权重"),
    ("MLM + NSP", "掩蔽语言模型 + 下一句预测"),
    ("MLM + sentence order (SOP)", "掩蔽语言模型 + 句子顺序预测"),
    ("{n} layers", "{0} 层"),
    ("6 layers, from every\nother teacher layer", "6 层，取自教师模型的\n每隔一层"),
    ("dense + tanh on [CLS]", "[CLS] 上的全连接 + tanh"),
    ("distillation from BERT:\nsoft targets + MLM + cosine", "从 BERT 知识蒸馏：\n软目标 + 掩蔽语言模型 + 余弦损失"),
    ("{}: V = {}, E = {}, H = {}, L = {}", "{0}：V = {1}，E = {2}，H = {3}，L = {4}"),
    ("BERT: one table V × H\n= {} parameters", "BERT：一张 V × H 的表\n= {0} 个参数"),
    ("table V × E\n{}", "V × E 的表\n{0}"),
    ("dense E × H\n{}", "全连接 E × H\n{0}"),
    ("ALBERT: {} parameters\n({} of BERT's table)", "ALBERT：{0} 个参数\n（BERT 嵌入表的 {1}）"),
    ("BERT: L = {} layers, each its own weights\n= {} parameters", "BERT：L = {0} 层，各有各的权重\n= {1} 个参数"),
    ("one layer\n{} parameters", "一层\n{0} 个参数"),
    ("ALBERT: the same layer looped {} times:\n{} parameters, the same compute as BERT",
     "ALBERT：同一层循环 {0} 次：\n{1} 个参数，计算量与 BERT 相同"),
]

# One mechanism each (`mechanisms`).
MECHANISMS = [
    ("D = {} numbers per token become N = {} heads of Dh = D / N = {}",
     "每个词元的 D = {0} 个数分给 N = {1} 个头，每个头 Dh = D / N = {2}"),
    ("head {n}", "头 {0}"), ("token {n}", "词元 {0}"),
    ("one of the B = {} sequences; view and transpose move no number in memory, they index the same numbers anew",
     "图中是 B = {0} 个序列中的一个；view 和 transpose 不移动内存中的数，只是换一种方式索引同一批数"),
    ("{}: rows 0-{n} trained; rows {n}-{n} untouched", "{0}：训练第 0-{1} 行；第 {2}-{3} 行未被训练"),
    ("{}: rows 0-{n} trained", "{0}：训练第 0-{1} 行"),
    ("phase {n}: {n} tokens", "阶段 {0}：{1} 个词元"), ("after all phases", "全部阶段之后"),
    ("row of the position-embedding table (= position in the sequence)", "位置嵌入表的行（= 序列中的位置）"),
    ("which of the {n} position rows each phase trains", "每个阶段训练 {0} 行位置嵌入中的哪些行"),
    ("weights: {} ({})", "权重：{0} ({1})"), ("gradients: {} ({})", "梯度：{0} ({1})"),
    ("optimizer moments: {} ({})", "优化器的两个矩：{0} ({1})"), ("activations: {} ({})", "激活值：{0} ({1})"),
    ("one fp32 training step with AdamW: {}, {}, batch {} × {}: {}",
     "用 AdamW 的一个 fp32 训练步：{0}，{1}，批量 {2} × {3}：{4}"),
    ("each word's tag on its first piece; -100 elsewhere", "每个词的标签放在它的第一个子词上，其余为 -100"),
    ("words", "词"), ("pieces", "子词"), ("labels", "标签"),
    ("-100: cross-entropy's ignore_index, no loss; red: a word's continuation piece",
     "-100：交叉熵损失的 ignore_index，不计损失；红框：词的后续子词"),
    ("padded: {} rows × {} = {} slots, {} padding", "填充：{0} 行 × {1} = {2} 个位置，{3} 是填充"),
    ("packed: {} rows × {} = {} slots, {} padding", "打包：{0} 行 × {1} = {2} 个位置，{3} 是填充"),
    ("{n} sequences, {n} real tokens (grey: padding)", "{0} 个序列，{1} 个真实词元（灰色：填充）"),
    ("{=} (1 tensor)", "{0}（1 个张量）"), ("{=} ({n} tensors)", "{0}（{1} 个张量）"),
    ("{=} (1 tensor)\ndropped: no place in the class", "{0}（1 个张量）\n丢弃：模型类中没有它的位置"),
    ("{=} ({n} tensors)\ndropped: no place in the class", "{0}（{1} 个张量）\n丢弃：模型类中没有它的位置"),
    ("{=} (1 tensor)\nnew: initialised at random", "{0}（1 个张量）\n新增：随机初始化"),
    ("{=} ({n} tensors)\nnew: initialised at random", "{0}（{1} 个张量）\n新增：随机初始化"),
    ("checkpoint", "检查点"), ("model class", "模型类"),
    ("green: loaded from the checkpoint; red: the new head, trained by fine-tuning",
     "绿色：从检查点加载；红色：新的输出层，由微调训练"),
]

# The masking pictures (`viz`: draw_masking, masking_strip, masking_legend, token_strip) and the
# titles lessons 05 and 19 give them.
MASKING = [
    ("not selected", "未选中"), ("selected → [MASK]", "选中 → [MASK]"), ("selected → random", "选中 → 随机词元"),
    ("selected → kept", "选中 → 保持不变"), ("special (never selected)", "特殊词元（从不选中）"),
    ("original", "原文"),
    ("p = {}, seed {} (whole words): {} of {} tokens selected", "p = {0}，种子 {1}（全词掩蔽）：{3} 个词元中选中 {2} 个"),
    ("p = {}, seed {}: {} of {} tokens selected", "p = {0}，种子 {1}：{3} 个词元中选中 {2} 个"),
    ("MLM masking of real text (seed {})", "为掩蔽语言模型掩蔽真实文本（种子 {0}）"),
    ("token-level masking (p = {}, seed {})", "逐词元掩蔽（p = {0}，种子 {1}）"),
    ("whole-word masking (p = {}, seed {})", "全词掩蔽（p = {0}，种子 {1}）"),
    ("segment ids around the first [SEP] of an IsNext pair", "IsNext 句对中第一个 [SEP] 前后的片段 id"),
    ("pair {n} masked on three reads: which positions are predicted", "句对 {0} 三次读取的掩蔽：要预测哪些位置"),
    ("token position", "词元位置"),
    ("characters: {} of {} selected, {} word(s) half hidden", "逐字：{1} 个字中选中 {0} 个，{2} 个词被遮住一部分"),
    ("whole words: {} of {} selected, {} word(s) half hidden", "全词：{1} 个字中选中 {0} 个，{2} 个词被遮住一部分"),
]

LABELS: list[tuple[str, str]] = [*LESSON_TITLES, *MAP, *ENCODER, *HEADS, *FAMILY, *MECHANISMS, *MASKING]
# What a value of the English side matches: anything (translated in turn), a number, a code name.
SLOTS = {"{}": "(.+?)", "{n}": r"([0-9][0-9.,]*)", "{=}": "(.+?)"}


@lru_cache(maxsize=None)
def _patterns() -> tuple[dict[str, str], list[tuple[re.Pattern, tuple[bool, ...], str]]]:
    """The table as exact labels, and as (pattern, which values are translated, Chinese) for
    labels with values."""
    exact, patterns = {}, []
    for english, chinese in LABELS:
        pieces = re.split(r"(\{[=n]?\})", english)
        if len(pieces) == 1:
            exact[english] = chinese
            continue
        regex = "".join(SLOTS.get(p, re.escape(p)) for p in pieces)
        translated = tuple(p == "{}" for p in pieces if p in SLOTS)
        patterns.append((re.compile(regex, re.S), translated, chinese))
    return exact, patterns


def translate(text: str) -> str:
    """`text` in Chinese: the table's row for it, whole or by a pattern (its values translated in
    turn where the table has them); unchanged when no row matches."""
    exact, patterns = _patterns()
    if text in exact:
        return exact[text]
    for pattern, translated, chinese in patterns:
        found = pattern.fullmatch(text)
        if found:
            values = [translate(v) if t else v for v, t in zip(found.groups(), translated)]
            return chinese.format(*values)
    return text
