kernel s target _
grid s[m=M / 256] persistent cluster [2, 4611686018427387904]