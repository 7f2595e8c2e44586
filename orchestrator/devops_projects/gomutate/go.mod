module opsbench.local/gomutate

go 1.19
