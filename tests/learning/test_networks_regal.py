import numpy as np
import pytest
import torch

from degenerate_graphs import chain_of_two, empty, no_edges, one_op
from graphopt.costmodels.machine import Machine
from graphopt.ir.generators import generate
from graphopt.learning.batching import graph_mean, graph_sum, make_batch
from graphopt.learning.systems.regal.actions import ActionConfig
from graphopt.learning.systems.regal.config import PolicyConfig
from graphopt.learning.systems.regal.env import compute_features
from graphopt.learning.systems.regal.network import (
    RegalPolicy,
    antithetic_actions,
    entropy,
    greedy_actions,
    log_probability,
    sample_actions,
)
from graphopt.solvers.base import Budget, Problem, Tracker


def _features(n_ops, seed, devices=2):
    problem = Problem(generate("erdos_renyi", n_ops, seed=seed), Machine(n_devices=devices))
    tracker = Tracker(problem, Budget(evaluations=400))
    return compute_features(problem, tracker, np.random.default_rng(seed)).features


@pytest.fixture(scope="module")
def features():
    return [_features(12, 0), _features(30, 1), _features(7, 2)]


def _network(seed=0, **changes):
    torch.manual_seed(seed)
    network = RegalPolicy(PolicyConfig(**changes))
    for head in network.beta_heads:  # away from the zero init, so graphs differ
        torch.nn.init.normal_(head[-1].weight)
    return network


def test_batch_numbers_ops_across_graphs(features) -> None:
    batch = make_batch(features)
    assert batch.ptr.tolist() == [0, 12, 42, 49]
    assert batch.batch.tolist() == [0] * 12 + [1] * 30 + [2] * 7
    np.testing.assert_array_equal(batch.x.numpy(), np.concatenate([f.node for f in features]))
    for g, f in enumerate(features):
        edges = (batch.edge_index[0] >= batch.ptr[g]) & (batch.edge_index[0] < batch.ptr[g + 1])
        np.testing.assert_array_equal(
            batch.edge_index[:, edges].numpy() - int(batch.ptr[g]), f.edge_index
        )
        np.testing.assert_array_equal(batch.edge_attr[edges].numpy(), f.edge)
        rank = batch.topological_rank[int(batch.ptr[g]) : int(batch.ptr[g + 1])]
        np.testing.assert_array_equal(rank.numpy(), f.topological_rank)
    alone = make_batch(features[:1])
    assert alone.x.dtype == torch.float32 and alone.edge_index.dtype == torch.int64
    assert alone.ptr.tolist() == [0, 12] and alone.batch.tolist() == [0] * 12


@pytest.mark.parametrize("encoder", ["mpnn", "lstm"])
def test_batched_outputs_equal_per_graph_outputs(features, encoder) -> None:
    network = _network(encoder=encoder, rounds=3)
    batch = make_batch(features)
    logits = network(batch)
    baseline = network.baseline(batch)
    assert logits.shape == (49, network.config.actions.n_heads(2), 4)
    assert baseline.shape == (3,)
    for g, f in enumerate(features):
        alone = make_batch([f])
        rows = slice(int(batch.ptr[g]), int(batch.ptr[g + 1]))
        torch.testing.assert_close(logits[rows], network(alone), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(
            baseline[g : g + 1], network.baseline(alone), rtol=1e-5, atol=1e-5
        )


def test_message_passing_sees_the_edges(features) -> None:
    network = _network(rounds=2)
    f = features[1]
    cut = type(f)(f.node, f.edge_index[:, :0], f.edge[:0], f.topological_rank)
    assert not torch.allclose(network(make_batch([f])), network(make_batch([cut])))
    blind = _network(rounds=0)
    torch.testing.assert_close(blind(make_batch([f])), blind(make_batch([cut])))


def test_log_probability_and_entropy(features) -> None:
    network = _network(rounds=1)
    batch = make_batch(features)
    logits = network(batch)
    actions = sample_actions(logits, torch.Generator().manual_seed(0), samples=2)
    assert actions.shape == (2, *logits.shape[:-1])
    log_p = log_probability(logits, actions[0], batch.batch, 3)
    expected = torch.log_softmax(logits, -1).gather(-1, actions[0].unsqueeze(-1)).squeeze(-1)
    for g in range(3):
        rows = slice(int(batch.ptr[g]), int(batch.ptr[g + 1]))
        torch.testing.assert_close(log_p[g], expected[rows].sum())
    h = entropy(logits, batch.batch, 3)
    assert torch.all(h > 0) and torch.all(h <= logits.shape[1] * np.log(4) + 1e-5)


def test_untrained_policy_is_neutral(features) -> None:
    torch.manual_seed(0)
    network = RegalPolicy(PolicyConfig(actions=ActionConfig(elite_bias=True)))
    batch = make_batch(features)
    logits = network(batch)
    assert torch.all(logits == logits[:1])  # every op alike
    greedy = greedy_actions(logits)[0]
    assert greedy.tolist() == [1, 2, 1, 2, 1, 2, 2]  # (m, v) per slot, then the elite bias
    torch.testing.assert_close(network.baseline(batch), torch.full((3,), -1.0), atol=0.5, rtol=0)


@pytest.mark.parametrize("actions", [ActionConfig(), ActionConfig(placement=False)])
def test_the_anchored_policy_starts_from_the_feature_run_heuristic(features, actions) -> None:
    torch.manual_seed(0)
    network = RegalPolicy(PolicyConfig(rounds=2, actions=actions, anchor=4.0))
    logits = network(make_batch(features))
    greedy = greedy_actions(logits).numpy()
    node = np.concatenate([f.node for f in features])
    targets = [node[:, 5], node[:, 6]] if actions.placement else []
    targets.append(1.0 - node[:, 7])
    for slot, target in enumerate(targets):
        distance = np.abs(greedy[:, 2 * slot] - target * 3)
        assert np.all(distance <= 0.5 + 1e-6)  # a nearest level (either one on a tie)
        assert np.all(greedy[:, 2 * slot + 1] == 0)  # the narrowest spread
    (logits[..., 0].sum()).backward()
    assert network.anchor is not None and network.anchor.grad is not None
    assert torch.all(network.anchor.grad != 0)


def test_sampling_is_seeded(features) -> None:
    logits = _network(rounds=1)(make_batch(features))
    first = sample_actions(logits, torch.Generator().manual_seed(5), 3)
    again = sample_actions(logits, torch.Generator().manual_seed(5), 3)
    assert torch.equal(first, again)


def test_bad_policy_configs() -> None:
    with pytest.raises(ValueError, match="encoder"):
        PolicyConfig(encoder="gcn")
    with pytest.raises(ValueError, match="devices"):
        PolicyConfig(n_devices=1)
    with pytest.raises(ValueError, match="anchor needs placement or scheduling"):
        PolicyConfig(
            anchor=1.0, actions=ActionConfig(placement=False, scheduling=False, elite_bias=True)
        )


@pytest.mark.parametrize("encoder", ["mpnn", "lstm"])
def test_batches_with_degenerate_graphs(encoder) -> None:
    # Graphs without ops (first, middle and last in a batch), without edges or tensors: every
    # graph keeps its own outputs, the baseline has one value per graph, nothing is NaN.
    degenerate = [
        _degenerate_features(make()) for make in (empty, one_op, no_edges, chain_of_two, empty)
    ]
    network = _network(encoder=encoder, rounds=2)
    batch = make_batch(degenerate)
    logits, baseline = network(batch), network.baseline(batch)
    assert logits.shape[0] == 8 and baseline.shape == (5,)
    assert torch.isfinite(logits).all() and torch.isfinite(baseline).all()
    for g, f in enumerate(degenerate):
        alone = make_batch([f])
        rows = slice(int(batch.ptr[g]), int(batch.ptr[g + 1]))
        torch.testing.assert_close(logits[rows], network(alone), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(baseline[g : g + 1], network.baseline(alone))
    actions = sample_actions(logits, torch.Generator().manual_seed(0))[0]
    assert log_probability(logits, actions, batch.batch, 5)[[0, 4]].tolist() == [0.0, 0.0]
    assert torch.isfinite(entropy(logits, batch.batch, 5)).all()


def _degenerate_features(graph):
    problem = Problem(graph, Machine(n_devices=2))
    tracker = Tracker(problem, Budget(evaluations=400))
    return compute_features(problem, tracker, np.random.default_rng(0)).features


@pytest.mark.parametrize("trailing", [(), (3,)])
def test_graph_sum_and_mean_equal_torch_geometric_scatter(trailing) -> None:
    """The pooling twins of torch_geometric's `scatter`, bit for bit."""
    from torch_geometric.utils import scatter

    generator = torch.Generator().manual_seed(0)
    for _ in range(100):
        n = int(torch.randint(0, 40, (1,), generator=generator))
        graphs = int(torch.randint(1, 6, (1,), generator=generator))
        index = torch.sort(torch.randint(0, graphs, (n,), generator=generator)).values
        values = torch.randn((n, *trailing), generator=generator)
        assert torch.equal(graph_sum(values, index, graphs), scatter(values, index, 0, graphs))
        assert torch.equal(
            graph_mean(values, index, graphs), scatter(values, index, 0, graphs, reduce="mean")
        )


def test_antithetic_pairs_mirror_and_keep_each_samples_distribution() -> None:
    logits = torch.log(torch.tensor([[[0.1, 0.2, 0.3, 0.4]], [[0.7, 0.1, 0.1, 0.1]]]))
    drawn = antithetic_actions(logits, torch.Generator().manual_seed(0), 20_000)
    assert drawn.shape == (20_000, 2, 1)
    for op in range(2):
        counts = torch.bincount(drawn[:, op, 0], minlength=4).float() / 20_000
        assert torch.allclose(counts, torch.softmax(logits[op, 0], 0), atol=0.015)
    # Partners are mirrored: a low first level pairs with a high second one.
    first, second = drawn[:10_000, 0, 0], drawn[10_000:, 0, 0]
    assert torch.corrcoef(torch.stack([first.float(), second.float()]))[0, 1] < -0.7
    with pytest.raises(ValueError, match="pairs"):
        antithetic_actions(logits, None, 3)
