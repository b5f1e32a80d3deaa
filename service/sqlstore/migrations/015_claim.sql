-- What Claim reads, so that a claim costs the same with 10 or 100,000
-- tasks queued: the ACTIVE tasks (the queue and the running ones, not the
-- history) by user in queue order, and the leased tasks by user.
CREATE INDEX tasks_queue ON tasks (user_id, request_time, num) WHERE status = 'ACTIVE';
CREATE INDEX tasks_leased ON tasks (user_id, lease_expires) WHERE worker IS NOT NULL;
