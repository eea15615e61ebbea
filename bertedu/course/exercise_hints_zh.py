"""The exercises' hints in Chinese: every hint a check cell of the English lessons passes, and its
Chinese (shown by the checks when ``bertedu.course.i18n.current() == "zh"``); and the same for the
names in words the check cells give what they check (``NAMES``).

A Chinese lesson's check cells are the English ones byte for byte, so a hint stays an English string
literal there and is looked up here at run time (``bertedu.course.exercise_messages.hint``). The
terms are the glossary's (docs/glossary.md, 中文 column, aligned with d2l-zh): 词元 (token), 子词 (piece),
片段 (segment), 掩蔽 (masking), 填充 (padding), 批量 (batch), 池化层 (pooler), 输出层 (head), 嵌入
(embedding), 预热 (warm-up), 暂退法 (dropout); code, formulas and numbers stay as the English hint
writes them. tests/test_exercises.py fails when a check cell's hint (or name in words) has no entry
here, or an entry no cell uses any more. Written for the Chinese edition (issue 58).
"""

HINTS: dict[str, str] = {
    # 00
    "three tables (vocab_size, max_position_embeddings and type_vocab_size rows, D columns each) plus LayerNorm's weight and bias":
        "三张表（行数分别是 vocab_size、max_position_embeddings 和 type_vocab_size，每张 D 列），再加上 LayerNorm 的 weight 和 bias",
    "in BERT every token attends to every real token: compare last_hidden_state[:, 0]":
        "BERT 里每个词元都关注所有真实词元：比较 last_hidden_state[:, 0]",
    "look only at the first token's vector, last_hidden_state[:, 0]; padded positions' own outputs do change, but no real token attends to them":
        "只看第一个词元的向量 last_hidden_state[:, 0]；填充位置自己的输出确实会变，但没有真实词元关注它们",
    "the pooler keeps one vector per sequence: the [CLS] token's":
        "池化层每个序列只留一个向量：[CLS] 词元的向量",
    "(B, T, D) for token vectors; (B, N, T, T) for attention: one T x T map per head":
        "词元向量是 (B, T, D)；注意力是 (B, N, T, T)：每个头一张 T x T 的图",
    # 01
    "the apostrophe and the comma are split off as punctuation; each Han character is a token; count 3 specials":
        "撇号和逗号作为标点单独切开；每个汉字是一个词元；特殊词元算 3 个",
    "section 5: the English vocabulary holds only a few hundred Han characters":
        "见第 5 节：英文词表只收了几百个汉字",
    "segment B is the text of B and the [SEP] that closes it":
        "片段 B 是 B 的文本加上结束它的 [SEP]",
    "n_head from the start, then keep - n_head from the end: 10 tokens in all":
        "开头取 n_head 个，结尾取 keep - n_head 个：一共 10 个词元",
    "with no tail, careful: tokens[-0:] is the whole list":
        "没有结尾部分时要小心：tokens[-0:] 是整个列表",
    "a short input is kept whole":
        "短的输入整个保留",
    "a '##' piece keeps the current word number; every other piece adds one":
        "'##' 开头的子词沿用当前的词编号；其他子词让编号加一",
    # 02
    "positions restart at every [CLS]: a token's position is its index minus the index of the latest [CLS] at or before it":
        "位置在每个 [CLS] 处从 0 重新算起：词元的位置是它的下标减去它之前（含它自己）最近一个 [CLS] 的下标",
    "dimensions 2i and 2i+1 hold sin(p w_i) and cos(p w_i): the pairs interleave, sin then cos":
        "第 2i 维和第 2i+1 维分别是 sin(p w_i) 和 cos(p w_i)：两两交错，先 sin 后 cos",
    "divide the sum of cos(d * w_i) by the squared length of a row, D / 2":
        "把 cos(d * w_i) 的和除以一行长度的平方，也就是 D / 2",
    # 03
    "compare every query position i with every key position j: |i - j| <= w, on both sides":
        "拿每个查询位置 i 和每个键位置 j 比较：|i - j| <= w，两侧都算",
    "q . k adds up d_k products of variance 1, so its std is sqrt(d_k); dividing by d_k divides the std by d_k":
        "q . k 是 d_k 个方差为 1 的乘积之和，所以标准差是 sqrt(d_k)；除以 d_k 会把标准差缩小 d_k 倍",
    "J = diag(p) - p p^T is symmetric, so J g = p * g - p * (p . g), with p . g summed over the last dimension (keepdim=True)":
        "J = diag(p) - p p^T 是对称的，所以 J g = p * g - p * (p . g)，其中 p . g 沿最后一维求和（keepdim=True）",
    # 04
    "dropout acts on each sub-layer's output before the residual addition: LayerNorm(x + drop(sublayer(x)))":
        "暂退法（dropout）作用在每个子层的输出上，在残差相加之前：LayerNorm(x + drop(sublayer(x)))",
    "the embeddings (three tables and a LayerNorm), ONE layer (12 D^2 + 13 D) and the pooler (D^2 + D)":
        "嵌入（三张表加一个 LayerNorm）、仅仅一层编码器（12 D^2 + 13 D）和池化层（D^2 + D）",
    "the scores and the weighted sum of V are products too: 2 T^2 Dh each, in each of N heads":
        "注意力分数和 V 的加权和也是矩阵乘法：N 个头里每个头各 2 T^2 Dh",
    # 05
    "a token becomes [MASK] when it is chosen (u_select < p, not [CLS] or [SEP]) and u_action < 0.8":
        "词元被选中（u_select < p，且不是 [CLS] 或 [SEP]）并且 u_action < 0.8 时，变成 [MASK]",
    "every chosen token has a label: the random (0.8 <= u_action < 0.9) and the kept ones too":
        "每个被选中的词元都有标签：换成随机词元的（0.8 <= u_action < 0.9）和保持原样的也有",
    "word 1 (una ##ffa ##ble) draws u[0, 1] = 0.1 < 0.15, so all three pieces are selected: read u at the word's number, not at the token's position":
        "第 1 个词（una ##ffa ##ble）抽到 u[0, 1] = 0.1 < 0.15，所以三个子词都被选中：按词的编号读 u，而不是按词元的位置",
    "u.gather(1, word_ids.clamp(min=0)), then leave out the -1 positions":
        "u.gather(1, word_ids.clamp(min=0))，再去掉 -1 的位置",
    "k = floor(0.15 n + 0.5), at least 1: 10 eligible tokens give 2 (a half rounds up)":
        "k = floor(0.15 n + 0.5)，至少为 1：10 个可选词元得 2（0.5 向上取整）",
    "the k eligible tokens with the smallest u in each row: sort the draws with the ineligible ones last":
        "每行中 u 最小的 k 个可选词元：给抽样值排序，把不可选的排在最后",
    # 06
    "the mean over the nine positions of -ln p(word), with p the word's share of the text":
        "九个位置上 -ln p(word) 的平均值，p 是这个词在文本中所占的比例",
    "which losses are there without an NSP label? what does the MLM loss start at when every piece is equally likely?":
        "没有 NSP 标签时还有哪些损失？每个子词的概率都一样时，MLM 损失从多少开始？",
    "the decay runs from the peak at the end of warm-up to 0 at `total`, over total - warmup steps":
        "衰减从预热结束时的峰值降到第 `total` 步的 0，共 total - warmup 步",
    # 07
    "Adam's moments of a zero gradient stay 0, so each update only multiplies the weight by (1 - rate * weight_decay), and the rate follows the schedule: 0 at the first warm-up step":
        "梯度为零时 Adam 的矩估计一直是 0，所以每次更新只把权重乘以 (1 - rate * weight_decay)；rate 随学习率计划变化：预热的第一步是 0",
    "6N for the weights (forward 2N, backward 4N), plus 12 L T D for the attention products QK^T and probs @ V, which have no weights":
        "权重部分 6N（前向 2N，反向 4N），再加上注意力中没有权重的两个乘积 QK^T 和 probs @ V 的 12 L T D",
    "count tokens, not steps: a phase-2 step holds 4x the tokens of a phase-1 step, and each costs more":
        "数词元，不数步数：第二阶段一步的词元是第一阶段一步的 4 倍，而且每个词元的计算量更大",
    # 08
    "the baseline's one answer is chosen on the training labels (neg here) and then scored on eval; choosing the commonest eval label would peek at the answers":
        "基线唯一的答案按训练集的标签选定（这里是 neg），再在评估集上打分；选评估集里最常见的标签就等于偷看了答案",
    "the padding positions must never be the maximum: fill them with -inf before taking it (a 0 there beats a dimension whose real values are all negative)":
        "填充位置绝不能成为最大值：取最大值之前把它们填成 -inf（填 0 会胜过真实值全为负数的那一维）",
    "count pieces, not distinct characters (很 is used four times), and leave the space out":
        "数词元，不是数不同的字（很 用了四次），空格不算",
    "很 is unknown four times, 了 and 好 twice each; on a tie sorted() order puts 了 before 好":
        "很 有四次是未知词元，了 和 好 各两次；次数相同时按 sorted() 的顺序，了 排在 好 前面",
    # 09
    "-100 only where word_ids is None; a word's first piece keeps its tag; a later piece of a B-X word is inside the entity (I-X), of any other word it repeats the word's tag":
        "只有 word_ids 为 None 的位置是 -100；词的第一个子词沿用词的标签；B-X 词的后续子词在实体内部（I-X），其他词的后续子词重复这个词的标签",
    "B- always starts a new entity, even right after an entity of the same type; an I- continues only an open entity of its own type":
        "B- 总是开始一个新实体，紧跟在同类型的实体后面也一样；I- 只能延续一个同类型、尚未结束的实体",
    "count the words whose predicted tag equals the gold tag, over all three sentences":
        "在全部三句话里，数预测标签和标准标签相同的词",
    "sentence 3's predicted PER at words 0-1 is wrong: its gold tags hold no PER there":
        "第 3 句在第 0-1 个词上预测的 PER 是错的：那里的标准标签没有 PER",
    # 10
    "count the pieces of A and of B; cut the longer one, and B on a tie, until 7 pieces are left":
        "分别数 A 和 B 的子词；每次截掉较长的一方（一样长时截 B），直到只剩 7 个子词",
    "segment 0 runs up to and including the first [SEP]; B and the last [SEP] are segment 1":
        "片段 0 一直到第一个 [SEP]（含）；B 和最后一个 [SEP] 属于片段 1",
    "each text is encoded alone, so swapping only swaps u and v":
        "每段文本单独编码，所以交换两段只是交换 u 和 v",
    "self-attention alone does not see order, but the position and segment embeddings do":
        "单靠自注意力看不到顺序，但位置嵌入和片段嵌入看得到",
    "cutting the longer text first means the shorter one loses tokens only once both are equal; from then on they shrink in turn, B first on a tie":
        "先截较长的文本，意味着两段一样长之后较短的那段才开始丢词元；从那以后两段轮流缩短，一样长时先截 B",
    # 11
    "punctuation goes, and 'a', 'an', 'the' go as whole words only ('theatre' stays)":
        "去掉标点；'a'、'an'、'the' 只在是完整单词时去掉（'theatre' 保留）",
    "after normalisation ('an' and 'the' go) does the answer equal either gold answer word for word?":
        "规范化之后（'an' 和 'the' 去掉），答案是否与某个标准答案逐词相同？",
    "normalise first, score each gold answer (precision = shared / predicted words, recall = shared / gold words), and keep the best":
        "先规范化，再对每个标准答案打分（精确率 = 共同词数 / 预测词数，召回率 = 共同词数 / 标准答案词数），取最好的那个",
    "score every (start, end) pair, mask the invalid ones (end < start, too long, outside the context), and take the best pair: not the best start and the best end separately":
        "给每一对 (start, end) 打分，掩蔽无效的对（end < start、太长、超出上下文），取最好的一对：而不是分别取最好的起点和最好的终点",
    # 12
    "select the labelled rows first (a boolean mask on the first two dimensions gives (M, D)), then decode":
        "先选出有标签的行（在前两维上用布尔掩码得到 (M, D)），再解码",
    "one row per real token: mask.sum() rows":
        "每个真实词元一行：共 mask.sum() 行",
    "B + 1 numbers: a leading 0, then the running total of lengths":
        "B + 1 个数：开头一个 0，然后是长度的累加和",
    "every example exactly once":
        "每个样本恰好出现一次",
    "padding of a batch = its longest length * 8 - the sum of its lengths; the longest of 8 uniform draws is near the top of the range":
        "一个批量的填充量 = 最大长度 * 8 - 长度之和；8 次均匀抽样的最大值接近取值范围的上端",
    "after sorting, the 8 lengths of a batch differ by about a range's eighth":
        "排序之后，一个批量里 8 个长度相差大约是取值范围的八分之一",
    "put examples of similar length in the same batch: sort the indices by length":
        "把长度相近的样本放进同一个批量：按长度给下标排序",
    "count FLOPs per position: the head's share of the forward is what the rung can remove":
        "按每个位置数 FLOPs：输出层在前向计算中所占的份额，就是这一级最多能省掉的",
    # 13
    "average last_hidden_state over the real tokens (attention_mask == 1); pooler_output is a different vector":
        "在真实词元（attention_mask == 1）上对 last_hidden_state 求平均；pooler_output 是另一个向量",
    "where do the encoder's weights come from, the file or the random generator?":
        "编码器的权重从哪里来：文件，还是随机数生成器？",
    "the checkpoint has no classifier.* weights (section 3's missing_keys)":
        "检查点里没有 classifier.* 权重（见第 3 节的 missing_keys）",
    "a head that has not trained has learned nothing of the task":
        "没训练过的输出层对任务一无所知",
    "undo each rule of interop._LAYER_RULES, and embeddings.LayerNorm <-> embeddings.layer_norm":
        "把 interop._LAYER_RULES 的每条规则反过来，还有 embeddings.LayerNorm <-> embeddings.layer_norm",
    # 14
    "after the regular starts, add n - k if the last regular window ends before n":
        "等间隔的起点之后，如果最后一个等间隔窗口在 n 之前就结束了，再加上 n - k",
    "a mean, not a sum: each row must still add up to 1 (divide by the number of windows of the document)":
        "是平均，不是求和：每行加起来仍然必须是 1（除以这篇文档的窗口数）",
    "one window, then one more for every stride of new pieces; the last window ends at the end":
        "先有一个窗口，之后每多 stride 个新子词就多一个窗口；最后一个窗口结束在文档末尾",
    "the first window covers k pieces; each further window covers at most stride new ones":
        "第一个窗口覆盖 k 个子词；之后每个窗口最多覆盖 stride 个新子词",
    # 15
    "count only the real tokens of a row: the k-th real token gets 1 + k, every padding token gets 1":
        "只数一行中的真实词元：第 k 个真实词元得 1 + k，每个填充词元都得 1",
    "one entry for every byte 0..255":
        "字节 0..255 每个一项",
    "the space is the 33rd byte that is not printable":
        "空格是第 33 个不可打印的字节",
    "bytes 161-172 and 174-255 are printable too; only the other bytes move to 256, 257, ...":
        "字节 161-172 和 174-255 也可以打印；只有其余的字节才移到 256、257、...",
    "a separator goes between two documents inside a block, and counts towards max_tokens":
        "同一个块里两篇文档之间放一个分隔符，它也计入 max_tokens",
    "repeatedly merge the neighbouring pair that was learnt EARLIEST (lowest index in merges), everywhere in the word, until no neighbouring pair is in merges":
        "反复合并最早学到的相邻对（在 merges 中下标最小的），词里每一处都合并，直到没有相邻对在 merges 中",
    # 16
    "three E-wide tables (tokens, positions, segments), a LayerNorm's gain and bias, and the projection's E x H matrix and H biases; print(module) shows the shapes":
        "三张宽 E 的表（词元、位置、片段），一个 LayerNorm 的增益和偏置，还有投影层的 E x H 矩阵和 H 个偏置；print(module) 会显示形状",
    "strictly fewer: when V*H / (V + H) is a whole number, that E itself only ties":
        "要严格更少：V*H / (V + H) 是整数时，这个 E 本身只是打平",
    "how many layers does an ALBERT model store?":
        "一个 ALBERT 模型存了几层？",
    "every layer still runs; only the embeddings do not grow":
        "每一层照样要算；只是嵌入没有变大",
    "copy the model first (copy.deepcopy): unshare must not change the model it is given":
        "先复制模型（copy.deepcopy）：unshare 不能改动传给它的模型",
    "an nn.ModuleList of copy.deepcopy(model.layers.layer), one per layer":
        "由 copy.deepcopy(model.layers.layer) 组成的 nn.ModuleList，每层一个",
    "L separate layers hold L - 1 more layers' weights than one shared":
        "L 个独立的层比一个共享层多存 L - 1 层的权重",
    "each separate layer starts as an exact copy of the shared one":
        "每个独立的层一开始都和共享层一模一样",
    "the shared weight is used once per layer; the chain rule adds up what each use contributes":
        "共享的权重每层用一次；链式法则把每次使用的贡献加起来",
    # 17
    "the logits at position t predict the token at t + 1: drop the last position of the logits and the first of the labels":
        "位置 t 的 logits 预测位置 t + 1 的词元：去掉 logits 的最后一个位置和标签的第一个位置",
    "the next token is scored by the logits at the *last* position, which has seen every token so far":
        "下一个词元由*最后*一个位置的 logits 打分，这个位置看过目前所有的词元",
    "the logits at the last position have no next token to predict, in each of the 32 windows":
        "32 个窗口中的每一个，最后一个位置的 logits 都没有下一个词元可预测",
    "15% of the pieces that can be selected: how many per window are not [CLS] or [SEP]?":
        "可被选中的子词的 15%：每个窗口里有多少个子词不是 [CLS] 或 [SEP]？",
    "of the selected pieces, 80% become [MASK], 10% a random piece, 10% stay as they are":
        "被选中的子词里，80% 变成 [MASK]，10% 换成随机子词，10% 保持不变",
    # 18
    "DistilBERT has no pooler (no D x D matrix after the layers) and no token-type table":
        "DistilBERT 没有池化层（各层之后没有 D x D 矩阵），也没有片段（token type）表",
    "m runs from 0 (the embeddings) to L_s: the last student layer learns the teacher's last":
        "m 从 0（嵌入）取到 L_s：学生模型的最后一层学教师模型的最后一层",
    "dividing the logits by T takes the T-th root of a ratio: the ratio falls like 522 ** (1 / T), not 522 / T":
        "logits 除以 T 相当于给比值开 T 次方：比值按 522 ** (1 / T) 下降，而不是 522 / T",
    "softmax ignores a constant added to a row: so must the limit (centre each row's logits)":
        "softmax 不受一行整体加上常数的影响：极限也必须如此（把每行的 logits 减去均值）",
    "subtract each row's mean logit first; the limit is sum_j (d_s - d_t)_j^2 / (2V), averaged over rows":
        "先减去每行 logits 的均值；极限是 sum_j (d_s - d_t)_j^2 / (2V)，再对各行求平均",
    # 19
    "every character of one word carries that word's number":
        "同一个词的每个字都带着这个词的编号",
    "a character reads the draw of its word, u[word_ids], not its own u[t]":
        "每个字读它所在词的抽样值 u[word_ids]，而不是它自己的 u[t]",
    "divide by the number of selected characters; the one-character word 1 has nothing in view":
        "除以被选中的字数；第 1 个词只有一个字，没有同词的字可见",
    "when every character of the word is selected, none of it is in view":
        "一个词的字全被选中时，这个词一个可见的字也没有",
    "a selected character of an n-character word has its word in view unless all n - 1 others are selected too: probability 1 - p ** (n - 1); weigh each length by its n * count * p selected characters":
        "n 字词里一个被选中的字，除非其余 n - 1 个字也都被选中，否则能看到本词的字：概率是 1 - p ** (n - 1)；每种词长按它被选中的字数 n * count * p 加权",
}

# The names in words that check cells give what they check (``check_close(..., "your precision")``),
# shown before the message. A name built by an f-string is written with ``{}`` where the f-string
# puts a value; the Chinese puts the values, in the same order, at its own ``{}``. A plain name
# (``tokens``, ``lr_at(10, 1.0, 100, 1000)``) is code and stays as it is.
NAMES: dict[str, str] = {
    # 00
    "first_token_moves for a change to a real token": "改动一个真实词元时的 first_token_moves",
    "first_token_moves for a change to a padded token": "改动一个填充词元时的 first_token_moves",
    # 01
    "head_tail(20 words, keep=10, n_head=3)": "head_tail(20 个词, keep=10, n_head=3)",
    # 03
    "weight on keys outside the window": "窗口外的键得到的权重",
    "softmax_backward on scores {}": "scores {} 上的 softmax_backward",
    # 05
    "select_whole_words (hand example)": "select_whole_words（手工示例）",
    "select_whole_words (seed {})": "select_whole_words（随机种子 {}）",
    "tokens selected per row ({}, seed {})": "每行选中的词元数（{}，随机种子 {}）",
    "select_exact ({}, seed {})": "select_exact（{}，随机种子 {}）",
    # 08
    "your predicted baseline": "你预测的基线",
    "row 1's logits with and without its padding": "第 1 行带填充和不带填充的 logits",
    "row 0 (no padding)": "第 0 行（没有填充）",
    "the [UNK] rate with those three characters added": "加上这三个字之后的 [UNK] 比例",
    # 09
    "entities({}) in order of start": "entities({})，按起点排序",
    "your token accuracy": "你的词元准确率",
    "your precision": "你的精确率",
    "your recall": "你的召回率",
    # 11
    "your exact match": "你的精确匹配（EM）",
    "your F1": "你的 F1 值",
    # 12
    "sequence {} in packed": "packed 中的第 {} 个序列",
    "the indices in your batches": "你的批量里的下标",
    "the batch sizes": "批量大小",
    "padding tokens of your batches": "你的批量里的填充词元数",
    # 15
    "the bytes byte_symbols() maps": "byte_symbols() 映射的字节",
    "the symbols of byte_symbols()": "byte_symbols() 给出的符号",
    "byte_symbols() on {}": "byte_symbols() 作用于 {}",
    # 16
    "extra parameters": "多出的参数量",
    "FLOP ratio": "FLOP 之比",
    "shared.layers after unshare(shared)": "unshare(shared) 之后的 shared.layers",
    "distinct layers of unshare(shared)": "unshare(shared) 中互不相同的层",
    "parameters added by unshare(shared)": "unshare(shared) 增加的参数量",
    # 17
    "GPT targets in one step": "一步中 GPT 的预测目标数",
    "BERT targets in one step": "一步中 BERT 的预测目标数",
    "BERT targets shown as themselves": "BERT 的预测目标中保持原样的个数",
    # 18
    "the smallest temperature": "最小的温度",
    "high_temperature_limit (rows with different means)": "high_temperature_limit（各行均值不同）",
    # 19
    "the characters of {}": "{} 的字",
    "the word ids of {}": "{} 的词编号",
    "selected positions": "被选中的位置",
    "partly_visible_share of the hand-made example": "手工示例上的 partly_visible_share",
    "a whole word selected": "整个词都被选中时",
}
