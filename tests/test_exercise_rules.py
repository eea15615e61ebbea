"""The rules that keep an exercise from being bypassed (bertedu.course.exercise_rules, issue 57 item 3).

Each rule is shown a small made-up notebook that breaks it (it reports the exercise and the cell)
and the same notebook mended the way READY_exercises tells the lesson authors to (it reports
nothing), so every rule can fail. The mended forms are also run, so the fixes the rules ask for
are fixes that work. The last test holds every lesson to all rules.

What the rules do not check, because no mechanical test separates it without false alarms (read the
lessons for it): a solution that retypes a worked example above (lessons.copied_share gives 02 ex1
vs c13 0.36, 04 ex1 vs c16 0.26, 09 ex1 vs c14 0.37, while exercises that copy nothing reach 0.46,
19 ex4 vs c6); a lesson function the check does not use but that answers the exercise (04 c16's
encoder_layer); the answer written out in prose or in a check's hint.
"""

import contextlib
import io
from pathlib import Path

import nbformat
import pytest
import torch

from bertedu.course import exercise_rules as rules
from bertedu.course import exercises as ex

LESSONS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def notebook(*cells):
    """A notebook of ("md", text) and ("setup" | "solution" | "check" | "lesson", code) cells, with
    nbgrader's metadata; a solution's code is put between the solution markers unless it has them."""
    nb = nbformat.v4.new_notebook()
    for n, (kind, text, *extra) in enumerate(cells):
        if kind == "md":
            nb.cells.append(nbformat.v4.new_markdown_cell(text))
            continue
        cell = nbformat.v4.new_code_cell(text)
        grade_id = f"ex99-{n}-{kind}"
        if kind == "setup":
            cell.metadata.nbgrader = {"grade": False, "grade_id": "ex99-setup", "locked": True, "solution": False}
        elif kind == "solution":
            if ex.BEGIN not in text:
                cell.source = f"{ex.BEGIN}\n{text}\n{ex.END}"
            cell.metadata.nbgrader = {"grade": False, "grade_id": "ex99-1-solution", "locked": False, "solution": True}
            cell.metadata.bertedu = {"kind": extra[0] if extra else ""}
        elif kind == "check":
            cell.metadata.nbgrader = {"grade": True, "grade_id": grade_id, "locked": True, "solution": False}
        nb.cells.append(cell)
    return nb


def found(rule, nb):
    return [(v.exercise, v.cell, v.rule) for v in rule(nb)]


def run(nb):
    """Run the notebook's code cells in one namespace, as a learner would (prints swallowed)."""
    namespace: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):
        for cell in nb.cells:
            if cell.cell_type == "code":
                exec(cell.source, namespace)
    return namespace


# -- (a) the reference in the learner's namespace ---------------------------------------------

NORMALIZE = """def normalize(text):
    ### BEGIN SOLUTION
    return " ".join(text.lower().replace("!", "").split())
    ### END SOLUTION"""
TEXTS = 'for text in ["Hello  World!", " Big Cat "]:\n'


def test_a_set_up_cell_that_imports_the_reference_is_caught():
    nb = notebook(("setup", "from bertedu.course.exercises import check_equal\n"
                            "from bertedu.training.metrics import normalize_answer"),
                  ("solution", NORMALIZE),
                  ("check", TEXTS + "    check_equal(normalize(text), normalize_answer(text).replace(' ', ' '))"))
    assert found(rules.reference_in_namespace, nb) == [("ex99-1", 0, "reference-in-namespace")]
    message = rules.reference_in_namespace(nb)[0].message
    assert "normalize_answer" in message and 'reference("bertedu.training.metrics:normalize_answer")' in message


@pytest.mark.parametrize("check", [
    "check_equal(normalize(text), reference('bertedu.training.metrics:normalize_answer')(text))",
    "from bertedu.training.metrics import normalize_answer as _normalize\n    check_equal(normalize(text), _normalize(text))",
])
def test_a_reference_fetched_inside_the_check_is_clean_and_works(check):
    nb = notebook(("setup", "import torch\nfrom bertedu.course.exercises import check_equal, reference\n"
                            "words = torch.tensor([1, 2])  # data handed to the learner"),
                  ("solution", NORMALIZE), ("check", TEXTS + "    " + check))
    assert found(rules.reference_in_namespace, nb) == []
    run(nb)  # the solution passes the mended check


def test_a_reference_reachable_through_its_module_or_under_another_name_is_caught():
    check = ("check", TEXTS + "    check_equal(normalize(text), reference('bertedu.training.metrics:normalize_answer')(text))")
    for setup in ["from bertedu.training import metrics", "from bertedu.training.metrics import normalize_answer as n",
                  "import bertedu.training.metrics"]:
        nb = notebook(("setup", "from bertedu.course.exercises import check_equal, reference\n" + setup),
                      ("solution", NORMALIZE), check)
        assert found(rules.reference_in_namespace, nb) == [("ex99-1", 0, "reference-in-namespace")], setup


def test_a_reference_the_lesson_imported_is_caught_until_the_set_up_cell_puts_it_away():
    lesson = ("lesson", "import bertedu\nfrom bertedu.training.metrics import normalize_answer\n"
                        "print(normalize_answer('The cat'))")
    check = ("check", TEXTS + "    check_equal(normalize(text), reference('bertedu.training.metrics:normalize_answer')(text))")
    setup = "from bertedu.course.exercises import check_equal, put_away, reference"
    bad = notebook(lesson, ("setup", setup), ("solution", NORMALIZE), check)
    assert found(rules.reference_in_namespace, bad) == [("ex99-1", 0, "reference-in-namespace")]
    assert 'put_away(globals(), "normalize_answer") in the set-up cell' in rules.reference_in_namespace(bad)[0].message
    # `import bertedu` stays: reaching bertedu.training.metrics.normalize_answer through it is an import by hand
    good = notebook(lesson, ("setup", setup + "\nput_away(globals(), 'normalize_answer')"), ("solution", NORMALIZE), check)
    assert found(rules.reference_in_namespace, good) == []
    namespace = run(good)
    assert "normalize_answer" not in namespace and "bertedu" in namespace
    ex.put_away(namespace, "normalize_answer", "bertedu")  # a name that is not there is fine
    assert "bertedu" not in namespace


def test_a_function_defined_above_that_computes_the_truth_is_caught_but_tools_are_not():
    setup = ("import torch\nfrom bertedu import BertConfig\nfrom bertedu.course.exercises import check_close\n"
             "def lib_double(x):\n    return 2 * x\n"
             "cfg = BertConfig.tiny()\nx = torch.arange(3.0)")
    solution = ("solution", "def double(x):\n    ### BEGIN SOLUTION\n    return x + x\n    ### END SOLUTION")
    bad = notebook(("setup", setup), solution, ("check", "check_close(double(x), lib_double(x))"))
    assert found(rules.reference_in_namespace, bad) == [("ex99-1", 0, "reference-in-namespace")]
    # torch, a config's class, data from the set-up cell, and the check's own function are tools, not answers
    good = notebook(("setup", setup), solution, ("check", "def _twice(v):\n    return torch.mul(v, 2)\n"
                                                          "expected = _twice(x * cfg.hidden_size / cfg.hidden_size)\n"
                                                          "check_close(double(x), expected.tolist())"))
    assert found(rules.reference_in_namespace, good) == []
    # a helper an earlier check defined stays in the namespace, even where a later check defines it again
    earlier = notebook(("setup", setup), ("solution", "predicted = 1"), ("check", "def _ref(v):\n    return 2 * v\n"
                                                                                  "check_close(predicted, _ref(0.5))"),
                       solution, ("check", "def _ref(v):\n    return 2 * v\ncheck_close(double(x), _ref(x))"))
    assert found(rules.reference_in_namespace, earlier) == [("ex99-1", 2, "reference-in-namespace")]
    earlier.cells[2].source += "\ndel _ref"
    assert found(rules.reference_in_namespace, earlier) == []


EMBED = ("solution", "def embed(emb, ids):\n    ### BEGIN SOLUTION\n"
                     "    return emb.layer_norm(emb.word_embeddings(ids))  # the parts, not the whole\n"
                     "    ### END SOLUTION")
EMB_SETUP = ("setup", "import torch\nfrom bertedu import BertConfig\nfrom bertedu.model.embeddings import BertEmbeddings\n"
                      "from bertedu.course.exercises import check_close, forbid_calls\n"
                      "emb = BertEmbeddings(BertConfig.tiny()).eval()\n"
                      "with torch.no_grad():\n    emb.position_embeddings.weight.zero_()\n"
                      "    emb.token_type_embeddings.weight.zero_()\nids = torch.tensor([[5, 6, 7]])")


def test_a_handed_object_that_computes_the_answer_is_caught_until_its_calls_are_forbidden():
    bad = notebook(EMB_SETUP, EMBED, ("check", "with torch.no_grad():\n    check_close(embed(emb, ids), emb(ids))"))
    assert found(rules.reference_in_namespace, bad) == [("ex99-1", 2, "reference-in-namespace")]
    assert "forbid_calls(emb)" in rules.reference_in_namespace(bad)[0].message
    good = notebook(EMB_SETUP, EMBED, ("check", "with torch.no_grad(), forbid_calls(emb):\n    yours = embed(emb, ids)\n"
                                                "with torch.no_grad():\n    check_close(yours, emb(ids))"))
    assert found(rules.reference_in_namespace, good) == []
    run(good)
    # a part of the handed object that the answer is meant to use is not the answer
    parts = notebook(EMB_SETUP, EMBED, ("check", "with torch.no_grad():\n"
                                                 "    check_close(embed(emb, ids), emb.layer_norm(emb.word_embeddings(ids)))"))
    assert found(rules.reference_in_namespace, parts) == []


def test_forbid_calls_refuses_the_object_and_named_methods_and_restores_them():
    from bertedu.family.gpt import CausalLM, GPTConfig

    namespace = run(notebook(EMB_SETUP))
    emb, ids = namespace["emb"], namespace["ids"]
    with ex.forbid_calls(emb):
        with pytest.raises(ex.ExerciseError, match="BertEmbeddings: was called by your answer"):
            emb(ids)
        emb.layer_norm(torch.zeros(1, 128))  # its parts still work
    assert emb(ids).shape == (1, 3, 128) and "forward" not in emb.__dict__
    gpt = CausalLM(GPTConfig.tiny(vocab_size=50)).eval()
    with ex.forbid_calls(gpt, "generate"):
        with pytest.raises(ex.ExerciseError, match=r"CausalLM\.generate: was called"):
            gpt.generate(ids, 2, top_k=1)
        assert gpt(ids).logits.shape == (1, 3, 50)
    assert gpt.generate(ids, 2, top_k=1).shape == (1, 5)
    with pytest.raises(TypeError, match="needs an nn.Module"):
        ex.forbid_calls(len)
    with pytest.raises(ValueError, match="package.module:name"):
        ex.reference("bertedu.data.mask_tokens")


# -- (b) a check reveals the truth before it compares -----------------------------------------

PREDICT = ("solution", "predicted_sum = 6", "predict")


def test_b_a_print_of_the_truth_before_the_comparison_is_caught():
    bad = notebook(("setup", "from bertedu.course.exercises import check_equal"), PREDICT,
                   ("check", "truth = sum([1, 2, 3])\nprint('the sum is', truth)\ncheck_equal(predicted_sum, truth)"))
    assert found(rules.reveals_before_check, bad) == [("ex99-1", 2, "reveal-before-check")]
    in_a_block = notebook(("setup", "from bertedu.course.exercises import check_equal"), PREDICT,
                          ("check", "truth = sum([1, 2, 3])\nif truth:\n    print(truth)\ncheck_equal(predicted_sum, truth)"))
    assert found(rules.reveals_before_check, in_a_block) == [("ex99-1", 2, "reveal-before-check")]


def test_b_a_print_after_the_comparison_or_of_the_learners_own_answer_is_clean():
    good = notebook(("setup", "from bertedu.course.exercises import check_equal"), PREDICT,
                    ("check", "print('you predicted', predicted_sum)\ntruth = sum([1, 2, 3])\n"
                              "for n in [1, 2]:\n    check_equal(predicted_sum * n, truth * n)\n    print(n, truth)\n"
                              "print('right: the sum is', truth)"))
    assert found(rules.reveals_before_check, good) == []


# -- (c) predictions never checked, overwritten, or computed ----------------------------------

ASK = ("md", "### Exercise 1: predict the sum\n\n*Before you run anything*, write the sum of 1, 2 and 3.")
SETUP = ("setup", "from bertedu.course.exercises import check_equal\nnumbers = [1, 2, 3]")


def test_c_a_checked_written_prediction_is_clean():
    nb = notebook(SETUP, ASK, ("solution", "predicted_sum = 1 + 2 + 3"), ("check", "check_equal(predicted_sum, sum(numbers))"))
    assert found(rules.unchecked_predictions, nb) == []


@pytest.mark.parametrize("solution, check, cell", [
    ("def add(values):\n    ### BEGIN SOLUTION\n    return sum(values)\n    ### END SOLUTION",
     "check_equal(add(numbers), 6)", 2),  # "predict" asked, but only a function is checked
    ("predicted_sum = 6", "predicted_sum = sum(numbers)\ncheck_equal(predicted_sum, 6)", 3),  # overwritten
    ("from bertedu import BertConfig\n### BEGIN SOLUTION\npredicted_sum = 3 * BertConfig.tiny().num_hidden_layers\n"
     "### END SOLUTION", "check_equal(predicted_sum, 6)", 2),  # computed with a tool: not a prediction
])
def test_c_unchecked_overwritten_or_computed_predictions_are_caught(solution, check, cell):
    nb = notebook(SETUP, ASK, ("solution", solution), ("check", check))
    assert found(rules.unchecked_predictions, nb) == [("ex99-1", cell, "prediction-unchecked")]


def test_c_a_derive_exercise_that_only_says_predict_in_passing_is_not_a_prediction():
    nb = notebook(SETUP, ("md", "### Exercise 1: the sum\n\nWrite `add(values)`; the label to predict is the sum."),
                  ("solution", "def add(values):\n    ### BEGIN SOLUTION\n    return sum(values)\n    ### END SOLUTION"),
                  ("check", "check_equal(add(numbers), 6)"))
    assert found(rules.unchecked_predictions, nb) == []


# -- (d) the answer above the solution ----------------------------------------------------------

PICK = ("solution", "def pick(hidden, labels):\n    ### BEGIN SOLUTION\n    return hidden[labels != -100]\n"
                    "    ### END SOLUTION")


def test_d_a_statement_that_shows_the_solutions_own_expression_is_caught():
    bad = notebook(("setup", "import torch"), ("md", "### Exercise 1\n\nReturn the labelled rows (`hidden[labels != -100]`)."),
                   PICK, ("check", "pick"))
    assert found(rules.answer_above, bad) == [("ex99-1", 2, "answer-above")]
    # naming the tools (a call with names) or describing the selection gives nothing away
    good = notebook(("setup", "import torch"), ("md", "### Exercise 1\n\nReturn the rows of `hidden` whose label is "
                                                      "not -100; `torch.nonzero(labels, as_tuple=True)` may help."),
                    PICK, ("check", "pick"))
    assert found(rules.answer_above, good) == []


def test_d_a_prediction_printed_by_a_worked_example_on_the_same_input_is_caught():
    worked = ("lesson", "pred, gold = 'the Eiffel Tower in Paris', 'Eiffel Tower'\nprint(f'F1 {2 / 3:.3f}')")
    check = ("check", "pred, gold = 'the Eiffel Tower in Paris', 'Eiffel Tower'\ncheck_close(predicted_f1, 2 / 3)")
    nb = notebook(worked, ("setup", "from bertedu.course.exercises import check_close"), ASK,
                  ("solution", "predicted_f1 = 2 * 0.5 * 1 / 1.5", "predict"), check)
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="F1 0.667\n")]
    assert found(rules.answer_above, nb) == [("ex99-1", 3, "answer-above")]
    nb.cells[0].source = "pred, gold = 'a red car', 'red car'\nprint(f'F1 {2 / 3:.3f}')"  # another input
    assert found(rules.answer_above, nb) == []


# -- the command and the lessons -----------------------------------------------------------------

def test_the_command_lists_each_violation_on_one_line_and_fails_when_there_is_one(tmp_path, capsys):
    nb = notebook(("setup", "from bertedu.course.exercises import check_equal"), PREDICT,
                  ("check", "truth = 6\nprint(truth)\ncheck_equal(predicted_sum, truth)"))
    nbformat.write(nb, tmp_path / "01_bad.ipynb")
    assert rules.main([str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines == [line for line in lines if line.startswith("01_bad.ipynb ex99-1 c2 [reveal-before-check]: ")]
    assert len(lines) == 1
    nb.cells[2].source = "truth = 6\ncheck_equal(predicted_sum, truth)\nprint(truth)"
    nbformat.write(nb, tmp_path / "01_bad.ipynb")
    assert rules.main([str(tmp_path / "01_bad.ipynb")]) == 0


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name[:2])
def test_no_lesson_exercise_can_be_bypassed(path):
    found = rules.violations(path)
    assert not found, "\n".join(map(str, found))
