-- The outbox no longer notifies from inside the transaction that writes an event: PostgreSQL holds one
-- database-wide lock from a notifying transaction's commit until its end, through the WAL flush, so every transfer,
-- withdrawal and deposit committed one behind another. The writer wakes the dispatcher after its commit instead
-- (src/outbox/OutboxSignal.ts).
DROP TRIGGER outbox_events_notify ON outbox_events;
DROP FUNCTION outbox_events_notify();
