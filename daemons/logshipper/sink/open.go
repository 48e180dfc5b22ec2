package sink

import "fmt"

// Options name a sink and what it needs: the daemon's flags, and the
// bench's, which must wire the shipper the way the daemon does.
type Options struct {
	// Name is kafka, stdout or file.
	Name string
	// Kafka configures the kafka sink.
	Kafka KafkaConfig
	// File is the file sink's path.
	File string
}

// Open makes the sink o names.
func Open(o Options) (Sink, error) {
	switch o.Name {
	case "kafka":
		return NewKafka(o.Kafka)
	case "stdout":
		return Stdout(), nil
	case "file":
		return File(o.File)
	default:
		return nil, fmt.Errorf("unknown sink %q", o.Name)
	}
}
