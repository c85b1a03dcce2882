//! A token bucket bounding the request rate of the whole server.

use std::sync::Mutex;
use std::time::Instant;

/// Admits `rate` requests per second on average, `burst` at once.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    rate: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// A full bucket; `rate <= 0` admits everything.
    pub fn new(rate: f64, burst: f64) -> TokenBucket {
        let burst = burst.max(1.0);
        TokenBucket { rate, burst, state: Mutex::new((burst, Instant::now())) }
    }

    /// Takes a token if there is one.
    pub fn try_acquire(&self) -> bool {
        if self.rate <= 0.0 {
            return true;
        }
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(state.1).as_secs_f64();
        state.0 = (state.0 + elapsed * self.rate).min(self.burst);
        state.1 = now;
        if state.0 >= 1.0 {
            state.0 -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::TokenBucket;

    #[test]
    fn bucket_admits_its_burst_then_refuses() {
        let bucket = TokenBucket::new(0.001, 5.0);
        let admitted = (0..20).filter(|_| bucket.try_acquire()).count();
        assert_eq!(admitted, 5);
        let unlimited = TokenBucket::new(0.0, 1.0);
        assert!((0..1000).all(|_| unlimited.try_acquire()));
    }
}
