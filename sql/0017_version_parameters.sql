-- The chain parameters each version was signed with (chains/ChainClient.ts WithdrawalParameters, bigints as digit
-- strings; sending/SignedParameters.ts): what a later version of the same send starts from. BTC replace-by-fee keeps
-- the inputs and raises the fee; TRON and SOL re-sign the same payload on a fresh reference once the earlier one
-- expired. Null on versions signed before this column existed (EVM keeps its own fee columns beside it).
ALTER TABLE outgoing_versions ADD COLUMN parameters jsonb;
