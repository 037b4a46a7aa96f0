"""Every write to tenants, members and quotas, one module per job: `lifecycle` (create, update, suspend,
resume, delete), `sleep` (sleep settings, the idle flag, waking), `members` (roles by hand and by single
sign-on, the access generation), `quotas` (quotas and their admission) and `platform_admins`; `roles` holds
`require`, the check every one of them makes.

Each service validates, writes in one transaction, writes its audit row, and asks for a reconcile once the
transaction has committed (so a worker never reads a state that was rolled back).

Lock order. Every transaction takes its row locks in one global order, so no two ever wait for each other in
a circle (PostgreSQL's "deadlock detected"):

  1. tenant rows, by id;
  2. admission rows (`tenants.capacity`), by (host cluster id, GPU model id).

A service takes at most one of each, in that order (`quotas.set_quota`: its tenant, then its model's
admission row). A transaction that makes several changes (an apply) takes every lock its changes will take
first, in that order, with `quotas.lock_in_order`. A transaction the database still ends for another's sake
(a tenant created in the same apply takes its admission rows as it goes) is run again by
`gpucloud.transactions.atomic`, which every service here opens its transaction with.
"""
