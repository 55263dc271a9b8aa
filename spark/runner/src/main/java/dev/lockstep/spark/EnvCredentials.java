package dev.lockstep.spark;

import java.net.URI;

import org.apache.hadoop.conf.Configuration;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.AwsCredentials;
import software.amazon.awssdk.auth.credentials.AwsCredentialsProvider;
import software.amazon.awssdk.auth.credentials.AwsCredentialsProviderChain;
import software.amazon.awssdk.auth.credentials.AwsSessionCredentials;
import software.amazon.awssdk.auth.credentials.InstanceProfileCredentialsProvider;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.auth.credentials.WebIdentityTokenFileCredentialsProvider;

/**
 * The S3A credentials of a bucket that a source, the sink or a static side gives its own S3
 * settings (engine/spark/s3a.go): {@code <prefix>AWS_ACCESS_KEY_ID}, {@code
 * <prefix>AWS_SECRET_ACCESS_KEY} and {@code <prefix>AWS_SESSION_TOKEN} from the environment, the
 * prefix being the bucket's {@code fs.s3a.lockstep.credentials.env.prefix}; without them, web
 * identity, then the instance's metadata, as the built-in engine does. The keys never enter the
 * plan or Spark's settings.
 */
public final class EnvCredentials implements AwsCredentialsProvider {
  static final String PREFIX_KEY = "fs.s3a.lockstep.credentials.env.prefix";

  private final AwsCredentialsProvider delegate;

  public EnvCredentials(URI bucket, Configuration conf) {
    String prefix = conf.getTrimmed(PREFIX_KEY, "");
    String id = System.getenv(prefix + "AWS_ACCESS_KEY_ID");
    String secret = System.getenv(prefix + "AWS_SECRET_ACCESS_KEY");
    String token = System.getenv(prefix + "AWS_SESSION_TOKEN");
    if (set(id) && set(secret)) {
      AwsCredentials creds = set(token) ? AwsSessionCredentials.create(id, secret, token) : AwsBasicCredentials.create(id, secret);
      delegate = StaticCredentialsProvider.create(creds);
    } else {
      delegate = AwsCredentialsProviderChain.of(WebIdentityTokenFileCredentialsProvider.create(), InstanceProfileCredentialsProvider.create());
    }
  }

  private static boolean set(String s) {
    return s != null && !s.isEmpty();
  }

  @Override
  public AwsCredentials resolveCredentials() {
    return delegate.resolveCredentials();
  }
}
