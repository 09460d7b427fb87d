"""Bradley-Terry loss against hand-worked numbers; oracle labels; the ensemble learns a ranking."""

import math

import torch

from robotrl.rewards.preference import CANT_TELL, OracleLabeller, RewardEnsemble, bradley_terry_loss, label_accuracy


def test_bradley_terry_loss_hand_worked():
    r_a = torch.tensor([0.0, 1.0, 0.0])
    r_b = torch.tensor([math.log(3.0), 1.0, 5.0])
    labels = torch.tensor([1, 0, CANT_TELL])
    # pair 0: P(b) = sigmoid(ln 3) = 3/4, label b -> -ln(3/4); pair 1: P(b) = 1/2, label a -> -ln(1/2); pair 2 dropped
    want = (-math.log(0.75) - math.log(0.5)) / 2
    torch.testing.assert_close(bradley_terry_loss(r_a, r_b, labels), torch.tensor(want))


def test_bradley_terry_loss_all_cant_tell_is_zero():
    assert float(bradley_terry_loss(torch.ones(2), torch.zeros(2), torch.tensor([CANT_TELL, CANT_TELL]))) == 0.0


def test_oracle_labels_and_accuracy():
    oracle = OracleLabeller(lambda s: s[:, 0], margin=0.1)
    a = torch.tensor([[0.0], [1.0], [0.5]])
    b = torch.tensor([[1.0], [0.0], [0.55]])
    labels = oracle.label(a, b)
    assert labels.tolist() == [1, 0, CANT_TELL]
    acc = label_accuracy(torch.tensor([1, 1, CANT_TELL]), labels)
    assert acc["accuracy"] == 0.5 and abs(acc["answered"] - 2 / 3) < 1e-6


def test_ensemble_of_three_learns_the_oracle_ranking():
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(400, 4, generator=gen), torch.randn(400, 4, generator=gen)
    oracle = OracleLabeller(lambda s: s[:, 0] - s[:, 1])
    ens = RewardEnsemble(4, members=3, hidden=32)
    torch.manual_seed(0)
    ens.fit(a, b, oracle.label(a, b), steps=150, batch_size=64, gen=gen)
    test_a, test_b = torch.randn(300, 4, generator=gen), torch.randn(300, 4, generator=gen)
    pred = (ens(test_b) > ens(test_a)).long()
    assert len(ens.members) == 3
    assert float((pred == oracle.label(test_a, test_b)).float().mean()) > 0.9
