module ferry

go 1.26.8

require (
	github.com/spf13/cobra v1.10.2
	github.com/zeebo/xxh3 v1.1.0
	golang.org/x/crypto v0.58.0
	golang.org/x/sys v0.49.0
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
)
