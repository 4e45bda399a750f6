"""Each API's access rule, by API key: its handler and the check in front of it.

Every API the registry routes (registry.py) must have one here, so a new API cannot be
served without deciding who may call it; ``guard.guarded`` refuses to compose a route
whose handler is not the one named here.
"""

from __future__ import annotations

from typing import Any

from kshim.broker.access import cluster, configs, groups, records, topic_admin, transactions
from kshim.broker.access.group_offsets import offset_fetch_rule
from kshim.broker.access.rule import AccessRule
from kshim.broker.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    alter_user_scram_credentials,
    api_versions,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_configs,
    describe_groups,
    describe_producers,
    describe_transactions,
    describe_user_scram_credentials,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    sync_group,
    txn_offset_commit,
)

RULES: dict[int, AccessRule[Any, Any]] = {
    0: AccessRule(produce.handle, records.produce_rule),
    1: AccessRule(fetch.handle, records.fetch_rule),
    2: AccessRule(list_offsets.handle, records.list_offsets_rule),
    3: AccessRule(metadata.handle, records.metadata_rule),
    8: AccessRule(offset_commit.handle, groups.offset_commit_rule),
    9: AccessRule(offset_fetch.handle, offset_fetch_rule),
    10: AccessRule(find_coordinator.handle, groups.find_coordinator_rule),
    11: AccessRule(join_group.handle, groups.join_group_rule),
    12: AccessRule(heartbeat.handle, groups.heartbeat_rule),
    13: AccessRule(leave_group.handle, groups.leave_group_rule),
    14: AccessRule(sync_group.handle, groups.sync_group_rule),
    15: AccessRule(describe_groups.handle, groups.describe_groups_rule),
    16: AccessRule(list_groups.handle, groups.list_groups_rule),
    # Before a principal is known: Kafka authorises neither (KafkaApis, SaslServerAuthenticator).
    17: AccessRule(sasl_handshake.handle, None),
    18: AccessRule(api_versions.handle, None),
    19: AccessRule(create_topics.handle, topic_admin.create_topics_rule),
    20: AccessRule(delete_topics.handle, topic_admin.delete_topics_rule),
    21: AccessRule(delete_records.handle, topic_admin.delete_records_rule),
    22: AccessRule(init_producer_id.handle, transactions.init_producer_id_rule),
    24: AccessRule(add_partitions_to_txn.handle, transactions.add_partitions_to_txn_rule),
    25: AccessRule(add_offsets_to_txn.handle, transactions.add_offsets_to_txn_rule),
    26: AccessRule(end_txn.handle, transactions.end_txn_rule),
    28: AccessRule(txn_offset_commit.handle, transactions.txn_offset_commit_rule),
    29: AccessRule(describe_acls.handle, cluster.describe_acls_rule),
    30: AccessRule(create_acls.handle, cluster.create_acls_rule),
    31: AccessRule(delete_acls.handle, cluster.delete_acls_rule),
    32: AccessRule(describe_configs.handle, configs.describe_configs_rule),
    33: AccessRule(alter_configs.handle, configs.alter_configs_rule),
    36: AccessRule(sasl_authenticate.handle, None),
    37: AccessRule(create_partitions.handle, topic_admin.create_partitions_rule),
    42: AccessRule(delete_groups.handle, groups.delete_groups_rule),
    44: AccessRule(incremental_alter_configs.handle, configs.incremental_alter_configs_rule),
    47: AccessRule(offset_delete.handle, groups.offset_delete_rule),
    50: AccessRule(
        describe_user_scram_credentials.handle, cluster.describe_user_scram_credentials_rule
    ),
    51: AccessRule(alter_user_scram_credentials.handle, cluster.alter_user_scram_credentials_rule),
    61: AccessRule(describe_producers.handle, topic_admin.describe_producers_rule),
    65: AccessRule(describe_transactions.handle, transactions.describe_transactions_rule),
    66: AccessRule(list_transactions.handle, transactions.list_transactions_rule),
}
