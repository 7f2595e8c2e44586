module opsbench.local/ratelimit

go 1.19
