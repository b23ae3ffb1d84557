"""request blob retention: the day each stored prompt text was last used

Revision ID: request_blob_seen
Revises: aggregate_indexes

A proxy in front of a busy stack stores every new prompt text (once, by hash); over
weeks that grows without bound.  ``seen_on`` is the last day a blob was stored or used
again by a turn (refreshed at most once a day, so a 50k-token row is not rewritten on
every turn), and a retention setting deletes the blobs unseen for N days
(``store/requests.py``: ``prune_blobs``).  Rows stored before this revision count as
seen on the day of the upgrade.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "request_blob_seen"
down_revision = "aggregate_indexes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("request_blobs", sa.Column("seen_on", sa.Date, nullable=True))
    op.execute("UPDATE request_blobs SET seen_on = CURRENT_DATE")
    op.create_index("ix_request_blobs_seen_on", "request_blobs", ["seen_on"])


def downgrade() -> None:
    op.drop_index("ix_request_blobs_seen_on", table_name="request_blobs")
    with op.batch_alter_table("request_blobs") as batch:
        batch.drop_column("seen_on")
