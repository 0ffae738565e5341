"""Process settings that must be in place before torch is first imported.

Torch's CPU kernels run on OpenMP threads that, by default, spin while they wait at each barrier. The small
CPU models here (cnn_small: hundreds of tiny ops per training step) hit a barrier every op, so when the
machine's cores are shared with other processes a spinning thread keeps losing its core to a descheduled
peer: on the 2-core development machine, one cnn_small evaluation took 17 s idle but 52-134 s at load 3-4
with the default policy, and 21-28 s at the same loads with passive waiting. So unless the user has chosen
a policy, idle OpenMP threads sleep. The setting only takes effect if torch has not been imported yet.
"""

from __future__ import annotations

import os


def before_torch_import() -> None:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` unless the environment already names a policy."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
