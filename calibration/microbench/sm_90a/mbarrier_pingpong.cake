# mbarrier hand-off round trip (calibration/microbench/sm_90a/README.md, bench `mbarrier`): two one-warp
# roles per SM play ping-pong on two mbarriers, I round trips per block. `ping` arrives on `to_pong` and
# waits on `to_ping`; `pong` waits on `to_pong` and arrives on `to_ping`. Each round trip is two
# hand-offs (an arrive in one warp until try_wait.parity returns in the other) and nothing else: no
# data moves, and the arrivals of one-warp roles are a __syncwarp plus one mbarrier.arrive.
kernel mbarrier_pingpong target sm_90a

dim T
dim I

out O: f32[T, 32]

grid tiles[b = T] persistent

role ping: warp 0
role pong: warp 1

barrier to_pong: count 1 producer ping consumer pong
barrier to_ping: count 1 producer pong consumer ping

on ping {
    reg v: f32[32] per warp
    for t in tiles {
        for i in 0..I {
            arrive(to_pong)
            wait(to_ping)
        }
        fill(v, 1.0)
        store(O[t.b, :], v)
    }
}

on pong {
    for t in tiles {
        for i in 0..I {
            wait(to_pong)
            arrive(to_ping)
        }
    }
}
