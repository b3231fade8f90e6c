//! Kafka's `Utils.murmur2` and its default partitioner, as `tests/reference/partitioner.py`
//! defines them.

const SEED: u32 = 0x9747_B28C;
const M: u32 = 0x5BD1_E995;

/// Kafka's murmur2 of `data`: a signed 32-bit hash.
pub fn murmur2(data: &[u8]) -> i32 {
    // Kafka hashes the length as an int: lengths past 2^31 wrap there too
    let mut h = SEED ^ (data.len() as u32);
    let mut words = data.chunks_exact(4);
    for word in &mut words {
        let mut k = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let rest = words.remainder();
    if rest.len() == 3 {
        h ^= u32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= u32::from(rest[1]) << 8;
    }
    if let Some(&first) = rest.first() {
        h ^= u32::from(first);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// `toPositive(murmur2(key))`: what Kafka takes modulo the partition count.
pub fn positive_hash(key: &[u8]) -> u32 {
    (murmur2(key) as u32) & 0x7FFF_FFFF
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_kafkas_own_test_vectors() {
        let vectors: [(&[u8], i32); 7] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
            (b"", 275_646_681),
        ];
        for (key, expected) in vectors {
            assert_eq!(murmur2(key), expected, "{}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn the_partition_hash_is_never_negative() {
        assert_eq!(
            positive_hash(b"foobar"),
            (-790_332_482i32 as u32) & 0x7FFF_FFFF
        );
    }
}
