// Command kafka-broker runs franz-go's kfake as a Kafka-protocol broker in its
// own process, so tests can kill and restart it. With -data-dir the broker
// keeps its topics, offsets and transactions across restarts.
//
// It prints "ready ADDR,ADDR..." on stdout once it listens, and stops cleanly
// on SIGTERM or SIGINT.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

const version = "lockstep-kafka-broker 1"

func main() {
	var (
		ports      = flag.String("ports", "", "comma-separated listen ports, one broker each (default: one broker on a free port)")
		dataDir    = flag.String("data-dir", "", "persist the cluster here and reload it at start")
		clusterID  = flag.String("cluster-id", "lockstep-test", "the cluster id brokers report")
		partitions = flag.Int("partitions", 4, "partitions of auto-created topics")
		configs    = flag.String("configs", "", "broker configs, k=v,k=v (e.g. log.cleaner.backoff.ms=100)")
		host       = flag.String("host", "127.0.0.1", "address to listen on and advertise (e.g. the e2e node's IP, for pods)")
		showVer    = flag.Bool("version", false, "print the version and exit")
	)
	flag.Parse()
	if *showVer {
		fmt.Println(version)
		return
	}
	opts := []kfake.Opt{
		kfake.ClusterID(*clusterID),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(*partitions),
	}
	if *ports != "" {
		var ps []int
		for _, p := range strings.Split(*ports, ",") {
			n, err := strconv.Atoi(p)
			if err != nil {
				fmt.Fprintf(os.Stderr, "kafka-broker: -ports: %v\n", err)
				os.Exit(2)
			}
			ps = append(ps, n)
		}
		opts = append(opts, kfake.NumBrokers(len(ps)), kfake.Ports(ps...))
	}
	if *host != "127.0.0.1" {
		// kfake listens on 127.0.0.1 and advertises its listener's address: listen elsewhere.
		opts = append(opts, kfake.ListenFn(func(network, address string) (net.Listener, error) {
			_, port, err := net.SplitHostPort(address)
			if err != nil {
				return nil, err
			}
			return net.Listen(network, net.JoinHostPort(*host, port))
		}))
	}
	if *dataDir != "" {
		opts = append(opts, kfake.DataDir(*dataDir), kfake.SyncWrites())
	}
	if *configs != "" {
		m := map[string]string{}
		for _, kv := range strings.Split(*configs, ",") {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		opts = append(opts, kfake.BrokerConfigs(m))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kafka-broker: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("ready %s\n", strings.Join(c.ListenAddrs(), ","))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	c.Close()
}
