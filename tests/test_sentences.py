import pytest

from bertedu.data.sentences import (
    guess_language,
    split_sentences,
    split_sentences_en,
    split_sentences_zh,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Mr. Smith paid $3.50. He left! Did he?", ["Mr. Smith paid $3.50.", "He left!", "Did he?"]),
        # abbreviations before a capital do not end a sentence
        ("Dr. Jones met Mrs. Brown at St. Paul's. They talked.", ["Dr. Jones met Mrs. Brown at St. Paul's.", "They talked."]),
        ("Fruit, e.g. Apples, i.e. Red ones. Good.", ["Fruit, e.g. Apples, i.e. Red ones.", "Good."]),
        ("He moved to the U.S. Senate in 1990. Then he retired.", ["He moved to the U.S. Senate in 1990.", "Then he retired."]),
        # initials, single and run together
        ("George W. Bush and J. R. R. Tolkien met R.S. Thomas. Odd.", ["George W. Bush and J. R. R. Tolkien met R.S. Thomas.", "Odd."]),
        ("So did I. Then we slept.", ["So did I.", "Then we slept."]),
        # decimals and version numbers are never cut
        ("Pi is 3.14159 and v2.0 shipped. Next.", ["Pi is 3.14159 and v2.0 shipped.", "Next."]),
        # "No." is an abbreviation before a number, an ordinary word otherwise
        ("See No. 5 on p. 12. The answer was no. Then we left.", ["See No. 5 on p. 12.", "The answer was no.", "Then we left."]),
        # "etc." often ends a sentence: cut before a capital
        ("Apples, pears, etc. The end.", ["Apples, pears, etc.", "The end."]),
        # closing quotes and brackets stay with their sentence; an opening quote starts one
        ('"Stop." She did. (It rained.) "Why?" he asked.', ['"Stop."', "She did.", "(It rained.)", '"Why?" he asked.']),
        # a sentence may start with a digit; a lower-case word after "." does not start one
        ("It ended in 1945. 1946 was calm. a.k.a. fine.", ["It ended in 1945.", "1946 was calm. a.k.a. fine."]),
        ("Wait... What?! No!!", ["Wait...", "What?!", "No!!"]),
        ("No final stop here", ["No final stop here"]),
        ("  ", []),
    ],
)
def test_split_sentences_en(text, expected):
    assert split_sentences_en(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("今天天气很好。我们去公园吧！你去吗？", ["今天天气很好。", "我们去公园吧！", "你去吗？"]),
        # closing quotes/brackets stay with the sentence they close
        ("他说：“好。”我们走吧。", ["他说：“好。”", "我们走吧。"]),
        ("（新华社记者摄。）下一句。", ["（新华社记者摄。）", "下一句。"]),
        ("《红旗颂》响起。」", ["《红旗颂》响起。」"]),
        # a run of end marks is one end; ellipsis and semicolon end too
        ("真的吗？！是……不是；对", ["真的吗？！", "是……", "不是；", "对"]),
        # commas and colons do not end a sentence; numbers with dots are not cut
        ("第一，增长３.５％：很好。", ["第一，增长３.５％：很好。"]),
        ("", []),
    ],
)
def test_split_sentences_zh(text, expected):
    assert split_sentences_zh(text) == expected


def test_split_sentences_dispatch_and_line_breaks():
    assert split_sentences("One here.\nTwo there.", "en") == ["One here.", "Two there."]
    # Chinese line breaks inside a sentence are layout, not spaces
    assert split_sentences("我们\n走吧。好。", "zh") == ["我们走吧。", "好。"]
    assert split_sentences("我们走吧。好。", "auto") == ["我们走吧。", "好。"]
    assert split_sentences("We go. Fine.", "auto") == ["We go.", "Fine."]
    with pytest.raises(ValueError, match="No sentence splitter for language 'fr'"):
        split_sentences("Bonjour.", "fr")


def test_guess_language():
    assert guess_language("人民日报社论") == "zh"
    assert guess_language("The People's Daily 人民日报") == "en"  # mostly Latin letters
    assert guess_language("２０１８年，中国 GDP 增长。") == "zh"
    assert guess_language("") == "en"
