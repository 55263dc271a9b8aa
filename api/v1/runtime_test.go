package v1_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	qt "github.com/lockstep-dev/lockstep/api/v1/querytest"
)

func TestValidateSparkRuntime(t *testing.T) {
	small := resource.MustParse("64Mi")
	cases := []struct {
		name string
		rt   v1.SparkRuntime
		want []string // "type field"
	}{
		{name: "sizing and a free setting are valid", rt: v1.SparkRuntime{
			Driver: v1.SparkProcess{Cores: 2}, Executor: v1.SparkProcess{Cores: 4}, Instances: 3,
			Conf: map[string]string{"spark.sql.streaming.minBatchesToRetain": "50",
				v1.SparkDriverJavaOptions: "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC", v1.SparkExecutorJavaOptions: "-Dlog4j.debug=true"},
		}},
		{name: "a heap or Spark settings among JVM options are refused", rt: v1.SparkRuntime{Conf: map[string]string{
			v1.SparkDriverJavaOptions:   "-XX:+UseSerialGC -Xmx2g",
			v1.SparkExecutorJavaOptions: "-Dspark.master=local",
		}}, want: []string{
			"FieldValueInvalid spec.runtime.spark.conf[spark.driver.extraJavaOptions]",
			"FieldValueInvalid spec.runtime.spark.conf[spark.executor.extraJavaOptions]",
		}},
		{name: "keys Lockstep owns are refused", rt: v1.SparkRuntime{Conf: map[string]string{
			"spark.master":                           "yarn",
			"spark.sql.shuffle.partitions":           "4",
			"spark.hadoop.fs.s3a.endpoint":           "http://x",
			"spark.sql.streaming.queryEvolution.foo": "x",
			"fs.s3a.endpoint":                        "http://x",
		}}, want: []string{
			"FieldValueInvalid spec.runtime.spark.conf[fs.s3a.endpoint]",
			"FieldValueForbidden spec.runtime.spark.conf[spark.hadoop.fs.s3a.endpoint]",
			"FieldValueForbidden spec.runtime.spark.conf[spark.master]",
			"FieldValueForbidden spec.runtime.spark.conf[spark.sql.shuffle.partitions]",
			"FieldValueForbidden spec.runtime.spark.conf[spark.sql.streaming.queryEvolution.foo]",
		}},
		{name: "too little memory", rt: v1.SparkRuntime{Driver: v1.SparkProcess{Memory: &small}}, want: []string{"FieldValueInvalid spec.runtime.spark.driver.memory"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkValidate(t, qt.Orders().Edit(func(s *v1.StreamingQuerySpec) { s.Runtime.Spark = &tc.rt }).Obj(), tc.want)
		})
	}
}

func TestRuntimeName(t *testing.T) {
	if got := (&v1.Runtime{}).Name(); got != v1.RuntimeLockstep {
		t.Errorf("Name() of no runtime = %s, want lockstep", got)
	}
	if got := (&v1.Runtime{Spark: &v1.SparkRuntime{}}).Name(); got != v1.RuntimeSpark {
		t.Errorf("Name() of spark = %s, want spark", got)
	}
}
