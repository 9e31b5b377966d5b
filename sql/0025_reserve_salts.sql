-- The proof of reserves (docs/reserves.md, src/ledger/Reserves.ts): each leaf of the liabilities' Merkle sum tree is
-- a salted hash of its owner's identity and balances. The salt keeps a sibling hash in another user's path from
-- naming who it is (customer ids are guessable; balances are few). One salt per owner: a user (`users.id`) or a
-- tenant's fee accounts (`tenants.id`); UUIDs of both kinds never collide. Made once, from the service's Entropy,
-- the first time a snapshot needs it; kept so that a proof handed out earlier can be checked against its snapshot.
-- Readable by whoever reads the database, like the balances themselves: it hides users from each other, not from
-- the operator.
CREATE TABLE reserve_salts (
  owner_id uuid PRIMARY KEY,
  salt text NOT NULL CHECK (salt ~ '^[0-9a-f]{64}$'),
  created_at timestamptz NOT NULL
);
