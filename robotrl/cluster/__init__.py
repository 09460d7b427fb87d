"""Scaling out: headless simulation batches on Ray (``batch``, ``jobs``) and torch DDP training (``ddp``).

Ray is imported only when a batch runs on it (``pip install 'robotrl[cluster]'``); DDP needs
only ``torch.distributed``.
"""

from robotrl.cluster.batch import Scenario, grid, run_batch, run_scenario, sample, write_results
from robotrl.cluster.jobs import CollectJob, EvalJob, register_job

__all__ = ["CollectJob", "EvalJob", "Scenario", "grid", "register_job", "run_batch", "run_scenario", "sample",
           "write_results"]
