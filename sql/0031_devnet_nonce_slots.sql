-- The simulated chain's mempool knows EVM nonces (issue 33, src/chains/simulated/SimulatedWithdrawalChain.ts): a
-- broadcast records its sender, nonce and what it was debited (asset, amount, fee), so a transaction with the same
-- sender and nonce and higher fees displaces a pending one (`replaced_by`: the displaced one is out of the mempool and
-- its debit returned), one the node forgot (a reorganization took its block) is displaced by any, and a nonce already
-- in a block refuses every other transaction ("nonce too low"), as a real node's mempool does.
-- Rows from before (and bytes that are not an EVM transaction) have no nonce and are not tracked.
ALTER TABLE devnet_broadcasts
  ADD COLUMN from_address text,
  ADD COLUMN nonce bigint CHECK (nonce >= 0),
  ADD COLUMN asset_id text,
  ADD COLUMN amount numeric(78, 0) CHECK (amount >= 0),
  ADD COLUMN network_fee numeric(78, 0) CHECK (network_fee >= 0),
  ADD COLUMN replaced_by text;

CREATE INDEX devnet_broadcasts_nonce_idx ON devnet_broadcasts (network_key, from_address, nonce) WHERE nonce IS NOT NULL;
