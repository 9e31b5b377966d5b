-- Every unit that leaves an address of ours is a journal entry (docs/ledger.md "Costs paid on chain", issue 35): the
-- network fee of a send that no withdrawal entry books (a sweep's, a GAS top-up's, and the 0-value fill that took
-- the nonce of a withdrawal refused for good) is booked as SEND_NETWORK_FEE, referencing the send
-- (outgoing_sends.id), in the transaction that records the send final. A withdrawal's own payload keeps its
-- NETWORK_FEE entry, referencing the withdrawal.
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_kind_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_kind_check CHECK (kind IN (
  'DEPOSIT_CREDIT', 'DEPOSIT_REVERSAL', 'MANUAL_DEPOSIT_CREDIT',
  'WITHDRAWAL_FREEZE', 'WITHDRAWAL_RELEASE', 'WITHDRAWAL_SETTLE', 'NETWORK_FEE',
  'TRANSFER', 'TRANSFER_FREEZE', 'TRANSFER_RELEASE', 'TRANSFER_SETTLE',
  'SEND_NETWORK_FEE'
));

-- What a send moved from its fee payer into accounts it created, beside its network fee (SOL: the rent-exempt minimum
-- of a token account it opened, which `meta.fee` leaves out): booked in the same SEND_NETWORK_FEE entry (always,
-- also for a withdrawal, whose NETWORK_FEE is `networkFeeRaw` = `meta.fee` only). Known once the send is final, like
-- network_fee; sends final before this column are left null (nothing was recorded).
ALTER TABLE outgoing_sends ADD COLUMN account_cost numeric(78, 0) CHECK (account_cost >= 0);
