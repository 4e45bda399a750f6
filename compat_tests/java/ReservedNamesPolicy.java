// A CreateTopicPolicy (KIP-108) refusing the names kshim reserves: `X.full` (the full-data
// view of X) and `X.delay` (its delay companion). The compatibility suite runs Apache Kafka
// with it to see how Kafka answers a request its policy refuses (compat_tests/
// test_reserved_names.py). Loaded as a Java agent only to join the application class
// path: Kafka is started with a fixed -cp, and an agent's jar is appended to it.

import java.lang.instrument.Instrumentation;
import java.util.Map;
import org.apache.kafka.common.errors.PolicyViolationException;
import org.apache.kafka.server.policy.CreateTopicPolicy;

public class ReservedNamesPolicy implements CreateTopicPolicy {
    public static void premain(String arguments, Instrumentation instrumentation) {
        // Nothing to instrument: the agent is only how the class reaches the class path.
    }

    @Override
    public void configure(Map<String, ?> configs) {}

    @Override
    public void validate(RequestMetadata request) throws PolicyViolationException {
        String topic = request.topic();
        for (String suffix : new String[] {".full", ".delay"}) {
            if (topic.endsWith(suffix)) {
                throw new PolicyViolationException(
                        "names ending in '" + suffix + "' are reserved by the policy");
            }
        }
    }

    @Override
    public void close() {}
}
