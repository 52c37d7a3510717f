import './index.css';
import './views.css';
import './runs.css';
