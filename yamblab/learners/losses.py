"""Losses of the AlphaZero training step (the YoloYamb post, "The Approach").

* policy: cross-entropy between the search's policy target and the policy head;
* value: cross-entropy between the realised points to come, as a two-hot distribution over
  the bins (:func:`~yamblab.search.targets.two_hot`), and the value head (or, for a scalar
  head, the squared error in units of ``value_max``);
* auxiliary: binary cross-entropy of bonus progress, cross-entropy of the longest straight;
* entropy bonus: ``− entropy_coef · H(policy)`` (keeps the policy from getting overconfident
  too early).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from yamblab.model.network import NetOutput
from yamblab.model.tokenizer import Inputs, longest_straight
from yamblab.search.targets import two_hot

#: Points per unit of the boundary head's squared-error loss.
BOUNDARY_LOSS_SCALE = 10.0


def masked_log_softmax(logits: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    """log-probabilities (B, A) with exact zeros (not −inf) on illegal actions."""
    return torch.where(legal, logits.log_softmax(dim=-1), torch.zeros_like(logits))


def policy_entropy(logits: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    """Entropy (nats) of the masked policy, float (B,)."""
    logp = masked_log_softmax(logits, legal)
    return -(logp.exp() * logp * legal).sum(dim=-1)


def compute_losses(out: NetOutput, x: Inputs, t: dict, cfg, centers: torch.Tensor,
                   value_max: float) -> dict[str, torch.Tensor]:
    """All loss terms and their weighted total.

    Args:
        out: the network's output on ``x``; t: targets from
            :meth:`~yamblab.learners.samples.SampleBatch.to_torch`; cfg: a
            :class:`~yamblab.learners.config.TrainConfig`; centers: value-bin centres.

    Returns:
        dict of scalar tensors: ``total`` always, and each term that had positions in the
        batch: ``policy`` and ``entropy`` (positions with a policy target), ``value`` (the main
        value head's positions: with a boundary head those with dice, and then the boundary
        term is added in), ``boundary`` (a boundary head's positions without dice: squared
        error in units of ``BOUNDARY_LOSS_SCALE`` points), ``aux_bonus`` (positions the
        transformer saw) and ``aux_straight`` (positions with dice), the aux terms only with aux
        heads. A term with no position is left out rather than reported as zero, so that step
        means (:meth:`~yamblab.learners.learner.Learner.train_iteration`) average it over the
        steps that trained it (split steps, ``TrainConfig.decision_batch_size``).
    """
    has_p = t["has_policy"]
    zero = out.value.new_zeros(())
    terms: dict[str, torch.Tensor] = {}
    if has_p.any():
        lg, lgl, tp = out.logits[has_p], x.legal[has_p], t["policy"][has_p]
        logp = masked_log_softmax(lg, lgl)
        terms["policy"] = -(tp * logp).sum(dim=-1).mean()
        terms["entropy"] = policy_entropy(lg, lgl).mean()
    vl, vt = out.value_logits, t["value"]
    boundary = zero
    if out.boundary_value is not None:
        # Boundary positions train the boundary head (squared error in units of
        # BOUNDARY_LOSS_SCALE points); the main value head learns the positions with dice.
        nod = x.dice[:, 0] == 0
        if nod.any():
            boundary = terms["boundary"] = (((out.boundary_value[nod] - vt[nod]) / BOUNDARY_LOSS_SCALE) ** 2).mean()
        vl, vt = vl[~nod], vt[~nod]
    if vl.shape[0] == 0:
        value = boundary
    else:
        if vl.shape[1] > 1:
            target = two_hot(vt.to(vl.dtype), centers.to(vl.dtype))
            value = -(target * vl.log_softmax(dim=-1)).sum(dim=-1).mean()
        else:
            value = F.mse_loss(vl[:, 0], vt / value_max)
        value = terms["value"] = value + boundary
    aux = zero
    if out.bonus_logit is not None:
        rows = out.trunk_rows          # positions the transformer (and so the aux heads) saw
        if rows is None:
            terms["aux_bonus"] = F.binary_cross_entropy_with_logits(out.bonus_logit, t["bonus"])
        elif rows.any():
            terms["aux_bonus"] = F.binary_cross_entropy_with_logits(out.bonus_logit[rows], t["bonus"][rows])
        has_dice = x.dice[:, 0] > 0
        if has_dice.any():
            terms["aux_straight"] = F.cross_entropy(out.straight_logits[has_dice],
                                                    longest_straight(x.dice[has_dice]))
        aux = terms.get("aux_bonus", zero) + terms.get("aux_straight", zero)
    total = cfg.value_coef * value + cfg.aux_coef * aux
    total = total + terms.get("policy", zero) - cfg.entropy_coef * terms.get("entropy", zero)
    return {"total": total, **terms}
