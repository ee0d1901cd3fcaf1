import numpy as np
import pytest

from graphopt.learning.systems.regal.actions import (
    ActionConfig,
    beta_parameters,
    elite_bias,
    gene_distributions,
)
from graphopt.solvers.brkga import BRKGAConfig
from graphopt.solvers.random_keys import ChromosomeLayout


@pytest.mark.parametrize("levels", [2, 4, 7])
def test_dequantized_betas_have_the_quantized_mean_and_variance(levels) -> None:
    m, v = np.meshgrid(np.arange(levels), np.arange(levels))
    alpha, beta = beta_parameters(m.ravel(), v.ravel(), levels)
    mu = (m.ravel() + 1) / (levels + 1)
    variance = mu * (1 - mu) * (v.ravel() + 1) / (levels + 1)
    assert np.all(alpha > 0) and np.all(beta > 0)
    np.testing.assert_allclose(alpha / (alpha + beta), mu)
    np.testing.assert_allclose(
        alpha * beta / ((alpha + beta) ** 2 * (alpha + beta + 1)), variance, rtol=1e-12
    )


def test_elite_bias_dequantization() -> None:
    np.testing.assert_allclose(elite_bias(np.arange(4), 4), [0.5, 0.625, 0.75, 0.875])


def test_genes_follow_the_chromosome_layout() -> None:
    layout = ChromosomeLayout(n_ops=3, n_tensors=2, n_devices=2)
    config = ActionConfig(levels=4, placement=True, scheduling=True, elite_bias=True)
    assert config.n_heads(2) == 7
    actions = np.array([[0, 0, 1, 1, 2, 2, 3], [3, 3, 0, 0, 1, 1, 0], [1, 2, 3, 0, 0, 3, 2]])
    genes = gene_distributions(actions, config, layout, np.array([0, 2]))
    for op in range(3):
        for device in range(2):
            a, b = beta_parameters(actions[op, 2 * device], actions[op, 2 * device + 1], 4)
            assert genes.alpha[op * 2 + device] == pytest.approx(float(a))
            assert genes.beta[op * 2 + device] == pytest.approx(float(b))
        a, b = beta_parameters(actions[op, 4], actions[op, 5], 4)
        assert genes.alpha[layout.op_priority + op] == pytest.approx(float(a))
        assert genes.beta[layout.op_priority + op] == pytest.approx(float(b))
        bias = 0.5 * (1 + actions[op, 6] / 4)
        assert genes.elite_bias[op * 2] == genes.elite_bias[layout.op_priority + op] == bias
    # Transfers of tensor 0 (made by op 0) and tensor 1 (op 2) follow their producer's priority.
    transfers = slice(layout.transfer_priority, layout.size)
    producers = [0, 0, 2, 2]
    np.testing.assert_array_equal(
        genes.alpha[transfers], genes.alpha[layout.op_priority + np.array(producers)]
    )
    np.testing.assert_array_equal(
        genes.beta[transfers], genes.beta[layout.op_priority + np.array(producers)]
    )
    np.testing.assert_array_equal(
        genes.elite_bias[transfers], genes.elite_bias[layout.op_priority + np.array(producers)]
    )
    genes.check(layout.size)


@pytest.mark.parametrize(
    "placement,scheduling,bias", [(True, False, False), (False, True, False), (False, True, True)]
)
def test_action_subsets_leave_the_other_genes_at_brkga_defaults(placement, scheduling, bias):
    layout = ChromosomeLayout(n_ops=4, n_tensors=3, n_devices=2)
    config = ActionConfig(4, placement, scheduling, bias)
    actions = np.full((4, config.n_heads(2)), 3)
    genes = gene_distributions(actions, config, layout, np.array([0, 1, 3]))
    placed = slice(0, layout.op_priority)
    priority = slice(layout.op_priority, layout.transfer_priority)
    assert np.all(genes.alpha[placed] != 1) == placement
    assert np.all(genes.alpha[priority] != 1) == scheduling
    assert np.all(genes.elite_bias[: layout.transfer_priority] != 0.7) == bias


def test_genes_the_policy_does_not_predict_follow_the_search_config() -> None:
    layout = ChromosomeLayout(n_ops=4, n_tensors=3, n_devices=2)
    config = ActionConfig(4, placement=False, scheduling=True)
    search = BRKGAConfig(elite_bias=0.6, mutant_alpha=1.0, mutant_beta=0.5)
    genes = gene_distributions(np.full((4, 2), 1), config, layout, np.array([0, 1, 3]), search)
    assert np.all(genes.elite_bias == 0.6)
    assert np.all(genes.beta[: layout.op_priority] == 0.5)
    assert np.all(genes.beta[layout.op_priority :] != 0.5)


def test_an_action_config_must_act() -> None:
    with pytest.raises(ValueError, match="at least one"):
        ActionConfig(placement=False, scheduling=False, elite_bias=False)
