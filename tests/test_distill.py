"""`bertedu distill`: the student's initialisation, its losses, and the command line."""

import pytest
import torch
from safetensors.torch import load_file

from bertedu.training.checkpoint import latest_checkpoint, list_checkpoints, write_manifest
from bertedu.cli import main
from bertedu.model.config import BertConfig
from bertedu.training.distill import DistillConfig, DistillingStudent, student_from_teacher
from bertedu.model.heads import BertForPreTraining
from bertedu.training.pretrain import fill_mask, load_pretrained

pytestmark = pytest.mark.slow  # seconds to a minute each: deselected by the quick tier (-m 'not slow')

SMALL = ["--corpus", "wiki-en", "--max-documents", "24", "--vocab-size", "1500", "--no-progress",
         "--max-seq-length", "64"]


def small_teacher(layers: int = 4) -> BertForPreTraining:
    torch.manual_seed(0)
    config = BertConfig(vocab_size=97, hidden_size=48, num_hidden_layers=layers, num_attention_heads=4,
                        intermediate_size=80, max_position_embeddings=40)
    return BertForPreTraining(config).eval()


def batch(vocab_size: int = 97):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, vocab_size, (3, 11), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    mask[2, 4:] = 0
    return ids, mask


def test_student_starts_as_the_teachers_chosen_layers():
    teacher = small_teacher()
    student = student_from_teacher(teacher, [0, 2])
    assert student.config.num_hidden_layers == 2
    t, s = teacher.state_dict(), student.state_dict()
    for name, value in s.items():
        source = name.replace("bert.layers.1.", "bert.layers.2.")  # student layer 1 is teacher layer 2
        assert torch.equal(value, t[source]), name
        assert value.data_ptr() != t[source].data_ptr(), f"{name} shares memory with the teacher"


def test_a_student_with_every_layer_has_nothing_to_learn():
    """The same network as the teacher: every distillation loss is exactly zero."""
    teacher = small_teacher()
    cfg = DistillConfig(out="unused", steps=1, soft_weight=5.0, mlm_weight=0.0)
    student = DistillingStudent(student_from_teacher(teacher, [0, 1, 2, 3]), teacher, cfg).eval()
    ids, mask = batch()
    with torch.no_grad():
        out = student(ids, attention_mask=mask)
    for part in ("hidden", "attention", "cosine", "soft"):
        assert float(getattr(out, part)) == pytest.approx(0.0, abs=1e-6), part
    assert float(out.loss) == pytest.approx(0.0, abs=1e-5)


def test_losses_follow_their_weights_and_reach_only_the_student():
    teacher = small_teacher()
    cfg = DistillConfig(out="unused", steps=1, hidden_weight=2.0, attention_weight=3.0, cosine_weight=0.5)
    student = DistillingStudent(student_from_teacher(teacher, [0, 2]), teacher, cfg).train()
    ids, mask = batch()
    out = student(ids, attention_mask=mask)
    assert out.soft is None and out.mlm_loss is None
    parts = 2 * out.hidden + 3 * out.attention + 0.5 * out.cosine
    assert float(out.loss.detach()) == pytest.approx(float(parts.detach()), rel=1e-6)
    assert min(float(out.hidden.detach()), float(out.attention.detach()), float(out.cosine.detach())) > 0
    out.loss.backward()
    assert student.bert.layers[0].attention.query.weight.grad.abs().sum() > 0
    assert all(p.grad is None and not p.requires_grad for p in student.teacher.parameters())
    assert not student.teacher.training  # student.train() does not reach the teacher
    names = set(student.state_dict())
    assert names == set(BertForPreTraining(student.config).state_dict()), "the checkpoint is the student's alone"


def test_settings_the_teacher_cannot_serve_are_refused():
    teacher = small_teacher(4)
    with pytest.raises(ValueError, match="multiple"):
        DistillingStudent(student_from_teacher(teacher, [0, 1, 2]), teacher, DistillConfig(out="x", steps=1))
    with pytest.raises(ValueError, match="MLM head"):
        DistillingStudent(student_from_teacher(teacher.bert, [0, 2]), teacher.bert,
                          DistillConfig(out="x", steps=1, soft_weight=5.0))
    with pytest.raises(ValueError, match="layers"):
        DistillConfig(out="x", steps=1, layers="0,two")
    with pytest.raises(ValueError, match="weight"):
        DistillConfig(out="x", steps=1, hidden_weight=0, attention_weight=0, cosine_weight=0)


@pytest.fixture(scope="module")
def teacher_run(tmp_path_factory):
    # its held-out measure is not what these tests check: 16 examples, not the default 512
    out = tmp_path_factory.mktemp("teacher")
    assert main(["pretrain", "--preset", "tiny", "--steps", "4", "--batch-size", "8", "--max-eval-examples", "16",
                 "--out", str(out), *SMALL]) == 0
    return out


def distill_args(teacher, out, *extra):
    return ["distill", "--teacher", str(teacher), "--layers", "1", "--corpus", "wiki-en", "--steps", "4",
            "--batch-size", "4", "--max-seq-length", "32", "--max-eval-sequences", "8", "--no-progress",
            "--soft-weight", "5", "--mlm-weight", "2", "--out", str(out), *extra]


@pytest.fixture(scope="module")
def student_run(teacher_run, tmp_path_factory):
    """`bertedu distill` with `distill_args`' settings, once for the tests that read its folder."""
    out = tmp_path_factory.mktemp("student") / "run"
    assert main(distill_args(teacher_run, out)) == 0
    return out


def test_distill_command_writes_a_student_every_tool_reads(teacher_run, student_run, tmp_path):
    """One layer of the tiny teacher's two, all five losses; twice with one seed: the same bits."""
    runs = [student_run, tmp_path / "b"]
    assert main(distill_args(teacher_run, runs[1])) == 0
    checkpoints = [latest_checkpoint(out) for out in runs]
    assert checkpoints[0].name == "checkpoint-4"
    a, b = (load_file(str(c / "model.safetensors")) for c in checkpoints)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    student, tokenizer = load_pretrained(runs[0])
    teacher, _ = load_pretrained(teacher_run)
    assert student.config.num_hidden_layers == 1 and teacher.config.num_hidden_layers == 2
    assert not torch.equal(student.bert.layers[0].attention.query.weight, teacher.bert.layers[1].attention.query.weight)
    assert len(fill_mask(student, tokenizer, "the [MASK] of the city .")[0]) == 5
    assert (runs[0] / "vocab.txt").read_text() == (teacher_run / "vocab.txt").read_text()
    assert "eval_loss" in (runs[0] / "metrics.jsonl").read_text()


def test_distill_command_errors_are_one_line(teacher_run, student_run, tmp_path, capsys):
    assert main(distill_args(tmp_path / "nowhere", tmp_path / "x")) == 2
    assert "--teacher" in capsys.readouterr().err
    assert main(distill_args(teacher_run, tmp_path / "y", "--layers", "5")) == 2
    assert "0..1" in capsys.readouterr().err
    checkpoints = list_checkpoints(student_run)
    assert main(distill_args(teacher_run, student_run)) == 2  # the same command again, into its finished folder
    assert "--resume" in capsys.readouterr().err
    assert list_checkpoints(student_run) == checkpoints  # refused before it wrote anything


def test_a_second_stage_starts_from_the_first_students_weights_on_a_tasks_text(teacher_run, student_run, tmp_path,
                                                                              capsys):
    """TinyBERT's two stages: general text, then a task's training inputs (labels unused),
    continuing from the first stage's student rather than from teacher layers."""
    first = student_run  # the first stage: `distill_args` on wiki-en
    stage_two = ["--init-student", str(first), "--corpus", "task:ner-en", "--soft-weight", "0", "--mlm-weight", "0"]
    frozen, moved = tmp_path / "frozen", tmp_path / "moved"
    assert main([*distill_args(teacher_run, frozen, *stage_two), "--lr", "1e-12", "--steps", "1"]) == 0
    assert main(distill_args(teacher_run, moved, *stage_two)) == 0
    start = load_file(str(latest_checkpoint(first) / "model.safetensors"))
    kept = load_file(str(latest_checkpoint(frozen) / "model.safetensors"))
    trained = load_file(str(latest_checkpoint(moved) / "model.safetensors"))
    assert start.keys() == kept.keys() == trained.keys()
    assert all(torch.allclose(start[k], kept[k], atol=1e-6) for k in start)  # began where stage one ended
    name = "bert.layers.0.attention.query.weight"
    assert not torch.allclose(start[name], trained[name], atol=1e-4)  # and learnt from the tweets

    other = tmp_path / "other-vocab"
    other.mkdir()
    (other / "vocab.txt").write_text((first / "vocab.txt").read_text() + "extra\n")
    assert main(distill_args(teacher_run, tmp_path / "x", "--init-student", str(other))) == 2
    assert "not the teacher's" in capsys.readouterr().err
    assert main(distill_args(teacher_run, tmp_path / "y", "--corpus", "task:nonsense")) == 2
    assert "not an embedded task" in capsys.readouterr().err


def test_task_documents_are_the_training_inputs_only():
    from bertedu.data.task_data import load_task
    from bertedu.training.distill import task_documents

    task = load_task("ner-en")
    documents = task_documents("ner-en")
    assert len(documents) == len(task.train)
    assert documents[0] == [" ".join(task.train[0].tokens)]
    test_texts = {" ".join(e.tokens) for e in task.test}
    assert not test_texts & {d[0] for d in documents}
    pairs = task_documents("paraphrase-en")
    assert all(len(d) == 2 for d in pairs[:50])


def test_a_task_model_learning_from_a_teacher_mixes_the_two_losses_by_their_weight():
    from bertedu.family.distillation import detach_task_teacher, learn_from_teacher
    from bertedu.family.distillation import soft_target_loss
    from bertedu.model.tasks import BertForTokenClassification

    config = BertConfig(vocab_size=97, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=80, max_position_embeddings=40, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    teacher, student = BertForTokenClassification(config, 5), BertForTokenClassification(config, 5)
    ids, mask = batch()
    labels = torch.randint(0, 5, ids.shape, generator=torch.Generator().manual_seed(2))
    plain = student(ids, attention_mask=mask, labels=labels)
    targets = teacher(ids, attention_mask=mask).logits
    learn_from_teacher(student, teacher, soft_weight=0.3, temperature=2.0).train()
    mixed = student(ids, attention_mask=mask, labels=labels)
    soft = soft_target_loss(plain.logits, targets, 2.0, mask)
    assert soft > 0 and torch.allclose(mixed.loss, 0.7 * plain.loss + 0.3 * soft, atol=1e-6)
    mixed.loss.backward()
    assert all(p.grad is None for p in teacher.parameters())  # the teacher only answers
    assert "task_teacher" not in dict(student.named_modules()) and student.state_dict().keys() == teacher.state_dict().keys()
    student.eval()
    assert torch.equal(student(ids, attention_mask=mask, labels=labels).loss, plain.loss)  # evaluation: labels only
    detach_task_teacher(student)
    assert type(student) is BertForTokenClassification and not hasattr(student, "task_teacher")


def test_the_layer_weight_adds_tinybert_layer_loss_to_the_two_losses():
    """A 1-layer student learning from a 2-layer teacher of the same width: with layer weight b
    the training loss is the mixed loss + b * TinyBERT's layer loss (student layer 1 against
    teacher layer 2), and its gradient reaches the student's embeddings."""
    from bertedu.family.distillation import learn_from_teacher, soft_target_loss, tinybert_layer_loss
    from bertedu.model.tasks import BertForTokenClassification

    def config(layers, hidden=48):
        return BertConfig(vocab_size=97, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4,
                          intermediate_size=80, max_position_embeddings=40, hidden_dropout_prob=0.0,
                          attention_probs_dropout_prob=0.0)

    torch.manual_seed(0)
    teacher, student = BertForTokenClassification(config(2), 5), BertForTokenClassification(config(1), 5)
    ids, mask = batch()
    labels = torch.randint(0, 5, ids.shape, generator=torch.Generator().manual_seed(2))
    plain = student(ids, attention_mask=mask, labels=labels, output_hidden_states=True, output_attentions=True)
    taught = teacher(ids, attention_mask=mask, output_hidden_states=True, output_attentions=True)
    layer = tinybert_layer_loss(plain.hidden_states, taught.hidden_states, plain.attentions, taught.attentions,
                                attention_mask=mask)
    soft = soft_target_loss(plain.logits, taught.logits, 2.0, mask)
    learn_from_teacher(student, teacher, soft_weight=0.3, temperature=2.0, layer_weight=0.5).train()
    mixed = student(ids, attention_mask=mask, labels=labels)
    assert layer.loss > 0 and torch.allclose(mixed.loss, 0.7 * plain.loss + 0.3 * soft + 0.5 * layer.loss, atol=1e-6)

    def embedding_grad(layer_weight):
        torch.manual_seed(0)
        model = learn_from_teacher(BertForTokenClassification(config(1), 5), teacher, 0.3, 2.0, layer_weight).train()
        model(ids, attention_mask=mask, labels=labels).loss.backward()
        return model.bert.embeddings.word_embeddings.weight.grad

    assert not torch.allclose(embedding_grad(1.0), embedding_grad(0.0))  # the layer loss is trained on, not detached
    with pytest.raises(ValueError, match="needs the teacher's width"):
        learn_from_teacher(BertForTokenClassification(config(1, hidden=40), 5), teacher, 0.5, 2.0, layer_weight=1.0)
    with pytest.raises(ValueError, match="multiple of the student's"):
        learn_from_teacher(BertForTokenClassification(config(3), 5), teacher, 0.5, 2.0, layer_weight=1.0)
    learn_from_teacher(BertForTokenClassification(config(1, hidden=40), 5), teacher, 0.5, 2.0)  # no layer loss: fine


def test_finetune_learns_from_a_finetuned_teacher_and_refuses_one_of_another_task(teacher_run, tmp_path, capsys):
    import json
    import shutil

    from bertedu.training.finetune import load_finetuned

    def finetune(out, *extra):
        return main(["finetune", "--task", "ner-en", "--init", str(teacher_run), "--max-train", "48", "--max-eval",
                     "16", "--steps", "3", "--batch-size", "8", "--max-seq-length", "32", "--no-progress",
                     "--out", str(tmp_path / out), *extra])

    assert finetune("teacher") == 0
    assert finetune("plain") == 0
    assert finetune("weight0", "--teacher", str(tmp_path / "teacher"), "--soft-weight", "0") == 0
    assert finetune("weight1", "--teacher", str(tmp_path / "teacher"), "--soft-weight", "1") == 0
    assert finetune("layers", "--teacher", str(tmp_path / "teacher"), "--soft-weight", "0", "--layer-weight", "1") == 0
    names = ("plain", "weight0", "weight1", "layers")
    weights = {name: load_finetuned(tmp_path / name)[0].state_dict() for name in names}
    key = "classifier.weight"
    assert torch.equal(weights["plain"][key], weights["weight0"][key])  # soft weight 0: the labels alone
    assert not torch.equal(weights["plain"][key], weights["weight1"][key])  # soft weight 1: the teacher alone
    assert not torch.equal(weights["plain"][key], weights["layers"][key])  # the layer loss moves the weights too
    assert finetune("z", "--teacher", str(tmp_path / "teacher"), "--layer-weight", "-1") == 2
    assert "layer_weight must be 0 (off) or positive" in capsys.readouterr().err

    other = tmp_path / "other-task"
    shutil.copytree(tmp_path / "teacher", other)
    info = json.loads((other / "model" / "task.json").read_text())
    (other / "model" / "task.json").write_text(json.dumps({**info, "task": "ner-zh"}))
    write_manifest(other / "model")  # a teacher of another task, not a damaged one
    assert finetune("x", "--teacher", str(other)) == 2
    assert "must have done this task" in capsys.readouterr().err
    assert finetune("y", "--teacher", str(tmp_path / "nowhere")) == 2
    assert "teacher must be a `bertedu finetune --out` folder" in capsys.readouterr().err
