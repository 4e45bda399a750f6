"""kshim's own Kafka client: a small blocking connection (``wire``, its frames in
``frames``), a Kafka client's security settings (``security``, ``tls``, ``sasl``, read from
Java properties by ``java_properties``, with ``jaas`` for sasl.jaas.config), and the admin
clients behind the ``kshim`` commands (``topic_admin``, ``group_admin``,
``transaction_admin``, ``topic_reader``, ``topic_writer``, ...). It imports the protocol
codecs only: never the broker, storage, server or command line.
"""
