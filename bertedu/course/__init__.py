"""What only the course uses: pictures, exercises, slides and the count baselines.

    viz.py              heat maps, masking pictures, embedding plots, QA span maps, loss curves
    diagrams.py         pictures of the architecture drawn from a config ("you are here", heads, blocks)
    mechanisms.py       pictures of one mechanism each (multi-head reshape, packing, -100 labels, ...)
    drawing.py          what the pictures share: boxes, arrows, labels that fit, model names, the learner's language
    labels_zh.py        the pictures' labels in Chinese: one table English -> 中文 in the glossary's terms
    fonts.py            a font for Chinese characters in matplotlib (the course's Noto Sans SC)
    i18n.py             the language the course speaks, "en" or "zh" (i18n.use, BERTEDU_LANG)
    stats.py            standard errors, paired comparisons and their verdict in plain words
    lessons.py          what makes a notebook a lesson, counted (tests/test_lessons.py)
    bertviz_offline.py  bertviz's views with their scripts inlined, so they draw without a network
    exercises.py        the exercises' checks (nbgrader-style solution markers)
    exercise_rules.py   the rules that keep an exercise from being bypassed (issue 57), and their command
    slides.py           slide tags for RISE / nbconvert
    figures.py          figures/*.png copied out of the lessons' stored outputs (cells tagged in metadata)
    ngram.py            count-based masked-token predictors, a reference line for pretraining
    flops.py            notebook 12's FLOP count of a forward pass, rung by rung of the speed ladder
    long_inputs.py      notebook 14's study: head, tail, head + tail, sliding windows on frozen features
    lm_study.py         notebook 17's study: BERT, GPT and an ELMo-style model on the same windows, the
                        middle-word fill, the two-sense probe (shared with benchmarks/elmo_study.py)
    book.py             the course as a static web book from the stored outputs (python -m bertedu.course.book)
    glossary.py         the terms of docs/glossary.md (anchor, English, Chinese), the Chinese edition's words

May import: anything it pictures (`model`, `family`, `data`, `training`, `pretrained`,
`interop`); never `bertedu.cli`.
"""
