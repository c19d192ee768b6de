-- Up Migration

-- The claim line's reset (written by hand; the functions come from
-- sql/20-scope-heads.sql and sql/30-claim-lease.sql next).
--
-- One row, whose generation wharf.reset_claim_lines() bumps when scopes
-- become claimable again with the ready_at they had (a workspace or a
-- connection leaving PAUSED) or a DBA moves ready_at back by hand: a claim
-- that finds it changed reads its line from the start, instead of from
-- the floor its session's last claim left (sql/30-claim-lease.sql, "The
-- claim line's floor"). In a table, not a sequence, so that the bump is
-- seen with the change it announces, when that commits.
CREATE TABLE wharf.claim_line_reset (
  only_row   boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  generation bigint NOT NULL DEFAULT 0
);
INSERT INTO wharf.claim_line_reset DEFAULT VALUES;

-- Down Migration

DROP TABLE wharf.claim_line_reset;
